#pragma once /* host emulation: attn.cu needs nothing from it */
