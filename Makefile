# srkit — build, test, bench, debug, CUDA, install.
#   make            build/libsr.a and build/srkit
#   make test       CUnit suites (verbose; non-zero exit on any failure)
#   make debug      the same suites under ASan + UBSan, in build-debug/
#   make bench      timings (never part of the tests)
#   make CUDA=1     also compile kernels/cuda/*.cu with nvcc and link cuBLAS
#   make setup      install the Debian packages (scripts/setup.sh)
#   make install    PREFIX=/usr/local: libsr.a, sr.h, srkit.pc, srkit
#   make models     fetch and convert the real models into $SRKIT_HOME
#   make data       generate the built-in aligned speech set into $SRKIT_HOME/data
#   make quickstart the README's main command (setup, build, data, default experiment)

CC      ?= cc
NVCC    ?= nvcc
PREFIX  ?= /usr/local
BUILD   ?= build
PKGS    := openblas hdf5 sndfile libcjson fftw3f samplerate libxxhash
DEBUG   ?= 0
CUDA    ?= 0
# Debian's python3 with python3-numpy/h5py (scripts/setup.sh installs them); a pyenv python3
# earlier on PATH may lack them.
PYTHON  ?= /usr/bin/python3

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS))
PKG_LIBS   := $(shell pkg-config --libs $(PKGS))
CUNIT_LIBS := $(shell pkg-config --libs cunit)

WARN    := -Wall -Wextra -Wshadow -Wno-unused-parameter
ifeq ($(DEBUG),1)
OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
LDSAN   := -fsanitize=address,undefined
else ifeq ($(DEBUG),thread)
OPT     := -O1 -g -fno-omit-frame-pointer -fsanitize=thread
LDSAN   := -fsanitize=thread
else
OPT     := -O2 -g
LDSAN   :=
endif
CFLAGS  ?=
CFLAGS  += -std=c11 -D_POSIX_C_SOURCE=200809L $(OPT) $(WARN) -pthread $(PKG_CFLAGS)
# libunistring (Unicode normalization for the text normalizers) ships no pkg-config file.
LDLIBS  := $(PKG_LIBS) -lunistring -lm -lpthread

LIB_SRC := $(wildcard core/*.c models/*.c models/*/*.c decoders/*.c eval/*.c kernels/*.c kernels/cpu/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(BUILD)/%.o)
CU_SRC  := $(wildcard kernels/cuda/*.cu)

ifeq ($(CUDA),1)
CUDA_HOME ?= /usr/local/cuda
CFLAGS    += -DSR_WITH_CUDA=1
NVFLAGS   := -O2 -std=c++17 -DSR_WITH_CUDA=1 -Xcompiler -fPIC,-Wall \
             -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
LIB_OBJ   += $(CU_SRC:%.cu=$(BUILD)/%.cu.o)
LDLIBS    += -L$(CUDA_HOME)/lib64 -lcublas -lcudart -lstdc++
endif

TEST_SRC := $(wildcard tests/*.c)
TEST_OBJ := $(TEST_SRC:%.c=$(BUILD)/%.o)

.PHONY: FORCE all test debug tsan bench setup install models data clean venv-ref fixtures quickstart
all: $(BUILD)/libsr.a $(BUILD)/srkit

# Objects depend on a stamp named after the compile flags: switching CUDA=1 / DEBUG / CFLAGS in
# the same BUILD directory rebuilds everything instead of linking objects of another build.
FLAGS_ID    := $(shell echo '$(CC) $(CFLAGS) $(NVCC) $(NVFLAGS) $(LDLIBS)' | cksum | cut -d' ' -f1)
FLAGS_STAMP := $(BUILD)/.flags-$(FLAGS_ID)
$(FLAGS_STAMP):
	@mkdir -p $(BUILD)
	@rm -f $(BUILD)/.flags-*
	@touch $@

$(BUILD)/%.o: %.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

# (nvcc writes no dependency files here: every .cu includes these two headers)
$(BUILD)/%.cu.o: %.cu $(FLAGS_STAMP) kernels/cuda/cuda_impl.h kernels/cuda/setting.h kernels/kernels.h \
             kernels/launch_log.h
	@mkdir -p $(dir $@)
	$(NVCC) $(NVFLAGS) -I core -c $< -o $@

$(BUILD)/libsr.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

# The git revision echoed into results.json; the header is rewritten only when it changes.
GIT_REV := $(shell git describe --always --dirty 2>/dev/null || echo unknown)
$(BUILD)/gitrev.h: FORCE
	@mkdir -p $(BUILD)
	@echo '#define SR_GIT_REV "$(GIT_REV)"' > $@.tmp
	@cmp -s $@.tmp $@ || mv $@.tmp $@
	@rm -f $@.tmp
$(BUILD)/tools/srkit.o: CFLAGS += -I$(BUILD)
$(BUILD)/tools/srkit.o: $(BUILD)/gitrev.h
FORCE:

$(BUILD)/srkit: $(BUILD)/tools/srkit.o $(BUILD)/libsr.a
	$(CC) $(LDSAN) -pthread -o $@ $^ $(LDLIBS)

$(BUILD)/test_srkit: $(TEST_OBJ) $(BUILD)/libsr.a
	$(CC) $(LDSAN) -pthread -o $@ $^ $(CUNIT_LIBS) $(LDLIBS)

# The suites run from the repository root (fixtures are found by relative path). The CLI
# suite calls build/srkit through SRKIT_BIN.
test: $(BUILD)/test_srkit $(BUILD)/srkit
	SRKIT_BIN=$(BUILD)/srkit OPENBLAS_NUM_THREADS=2 ./$(BUILD)/test_srkit

# allocator_may_return_null: libhdf5 asks for absurd sizes on the damaged (resealed) files of
# core_hdf5 and handles malloc's NULL; ASan would abort there instead.
debug:
	ASAN_OPTIONS=allocator_may_return_null=1 $(MAKE) BUILD=build-debug DEBUG=1 test

# ThreadSanitizer over the suites that run threads: the engine's decoder workers and batcher,
# the op set's worker pool (and AMX tile state per worker), streams on threads.
tsan:
	$(MAKE) BUILD=build-tsan DEBUG=thread build-tsan/test_srkit
	TSAN_OPTIONS=halt_on_error=1 OPENBLAS_NUM_THREADS=1 ./build-tsan/test_srkit engine_api engine_threads engine_equals_solo core_stream kernels_ops_rows kernels_gemm_bf16

bench: $(BUILD)/srkit
	./$(BUILD)/srkit bench --all --model $(SRKIT_HOME)/models/whisper-tiny.en.h5 --audio ../shared/data/librispeech-sample/1089-134686-0000.flac

# Debian packages (as root), then the data assets srkit reads at run time into $SRKIT_HOME
# (openai-whisper's spelling map for the whisper_en normalizer, fetched from PyPI).
setup:
	bash scripts/setup.sh
	bash scripts/fetch_assets.sh

# Reference packages (openai-whisper, nemo_toolkit, transformers, torch) for regenerating the
# golden fixtures live in a venv outside git; CI never needs them.
venv-ref:
	bash scripts/venv_ref.sh

fixtures:
	$(PYTHON) scripts/gen_test_fixtures.py
	$(PYTHON) scripts/gen_tokenizer_fixtures.py
	$(PYTHON) scripts/gen_convert_fixtures.py
	$(PYTHON) scripts/recast_model.py tests/fixtures/voxtral/model.h5 tests/fixtures/voxtral/model_i8.h5 --dtype int8
	$(PYTHON) scripts/recast_model.py tests/fixtures/voxtral/model_i8.h5 tests/fixtures/voxtral/model_i8_f32.h5 --dtype f32

models:
	bash scripts/fetch_models.sh

data:
	bash scripts/make_aligned_speech.sh

# The README's main command: set up, build, fetch the real tiny.en, generate the built-in speech
# set, then run the default experiment (configs/quickstart.json: the causal fine-tune and vanilla
# tiny.en, each WhisperRT streaming vs offline, on the generated speech) and print its report.
SRKIT_HOME ?= $(HOME)/.cache/srkit
quickstart: setup
	$(MAKE) all
	SRKIT_HOME=$(SRKIT_HOME) bash scripts/fetch_models.sh
	SRKIT_HOME=$(SRKIT_HOME) bash scripts/make_aligned_speech.sh
	SRKIT_HOME=$(SRKIT_HOME) ./$(BUILD)/srkit eval configs/quickstart.json --restart

install: all
	install -d $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/bin \
	           $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 $(BUILD)/libsr.a $(DESTDIR)$(PREFIX)/lib/
	install -m 644 core/sr.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(BUILD)/srkit $(DESTDIR)$(PREFIX)/bin/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(shell sed -n 's/#define SR_VERSION "\(.*\)"/\1/p' core/sr.h)|' \
	    -e 's|@REQUIRES@|$(PKGS)|' srkit.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/srkit.pc

clean:
	rm -rf build build-debug

# ---- fuzzing (tests/fuzz/, docs/fuzzing.md) ----------------------------------------------------
# libFuzzer harnesses, one per input format. The library is rebuilt with clang, coverage
# instrumentation and ASan + UBSan into $(FUZZ_BUILD)/ (build/ is untouched).
#   make fuzz FUZZ_S=N                 run every target N seconds, one after the other; prints
#                                      executions and coverage per target, fails on a finding
#   make fuzz FUZZ_TARGETS="ctm trn"   only those targets
#   make fuzz-build                    build the harnesses only
#   make fuzz-repro                    replay tests/fuzz/crashes/<target>/* (known findings)
FUZZ_CC      ?= clang-14
FUZZ_BUILD   ?= build-fuzz
FUZZ_S       ?= 60
FUZZ_TARGETS ?= audio config trn ctm textgrid manifest kaldi timeline normalizer model \
                model_content
FUZZ_CFLAGS  := -std=c11 -D_POSIX_C_SOURCE=200809L -O1 -g -fno-omit-frame-pointer \
                -fsanitize=address,undefined -fno-sanitize-recover=undefined \
                $(WARN) -pthread $(PKG_CFLAGS)
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/%.o)
FUZZ_BIN     := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)
# Seeds of the model target: small valid model files of the fixtures (read in place, copied
# into $(FUZZ_BUILD)/seeds/model at run time), plus one that fails a shape check.
FUZZ_MODEL_SEEDS := tests/fixtures/test_linear.h5 tests/fixtures/test_linear_int8.h5 \
                    tests/fixtures/test_linear_bf16.h5 tests/fixtures/test_linear_frontend.h5 \
                    tests/fixtures/bad_shape.h5 tests/fixtures/whisper/micro.h5 \
                    tests/fixtures/voxtral/micro.h5

.PHONY: fuzz fuzz-build fuzz-repro
.SECONDARY: $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/tests/fuzz/fuzz_%.o)
$(FUZZ_BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/libsr.a: $(FUZZ_LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/tests/fuzz/fuzz_%.o $(FUZZ_BUILD)/libsr.a
	$(FUZZ_CC) -fsanitize=fuzzer,address,undefined -pthread -o $@ $^ $(LDLIBS)

fuzz-build: $(FUZZ_BIN)

fuzz: fuzz-build
	@rm -rf $(FUZZ_BUILD)/seeds/model && mkdir -p $(FUZZ_BUILD)/seeds/model
	@for f in $(FUZZ_MODEL_SEEDS); do cp "$$f" $(FUZZ_BUILD)/seeds/model/$$(echo "$$f" | tr / _); done
	FUZZ_CC=$(FUZZ_CC) bash tests/fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_S) $(FUZZ_TARGETS)

fuzz-repro: fuzz-build
	FUZZ_CC=$(FUZZ_CC) bash tests/fuzz/run.sh --repro $(FUZZ_BUILD) 0 $(FUZZ_TARGETS)

-include $(LIB_OBJ:.o=.d) $(TEST_OBJ:.o=.d) $(BUILD)/tools/srkit.d
-include $(FUZZ_LIB_OBJ:.o=.d) $(FUZZ_BIN:$(FUZZ_BUILD)/fuzz_%=$(FUZZ_BUILD)/tests/fuzz/fuzz_%.d)
