#pragma once /* host emulation: the types and conversions are in cuda_impl.h */
