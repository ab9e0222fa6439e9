/*
 * test_api.c — core API contracts: status texts, thread-local error messages, NULL-safe
 * free/close, the registries, and sr_model_load's registry-level checks.
 */
#include <pthread.h>
#include <string.h>

#include "../core/internal.h"
#include "test.h"

static void test_strerror(void)
{
    const sr_status all[] = {SR_OK, SR_ERR_NOMEM, SR_ERR_IO, SR_ERR_FORMAT, SR_ERR_ARG,
                             SR_ERR_UNSUPPORTED, SR_ERR_DEVICE};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        CU_ASSERT_PTR_NOT_NULL(sr_strerror(all[i]));
        for (size_t j = 0; j < i; j++) CU_ASSERT(strcmp(sr_strerror(all[i]), sr_strerror(all[j])));
    }
    CU_ASSERT_STRING_EQUAL(sr_strerror((sr_status)-99), "unknown status");
}

static void *other_thread(void *arg)
{
    (void)arg;
    sr_error(SR_ERR_IO, "message from another thread");
    return NULL;
}

static void test_error_thread_local(void)
{
    sr_error(SR_ERR_ARG, "mine %d", 42);
    pthread_t t;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&t, NULL, other_thread, NULL), 0);
    pthread_join(t, NULL);
    CU_ASSERT_STRING_EQUAL(sr_last_error(), "mine 42");
    sr_error_prefix(SR_ERR_ARG, "file.h5");
    CU_ASSERT_STRING_EQUAL(sr_last_error(), "file.h5: mine 42");
    sr_error_clear();
    CU_ASSERT_STRING_EQUAL(sr_last_error(), "");
}

static void test_null_noops(void)
{
    sr_model_free(NULL);
    sr_stream_close(NULL);
    sr_stream_reset(NULL);
    sr_audio_free(NULL);
    sr_mel_free(NULL);
    sr_mel_stream_close(NULL);
    sr_config_free(NULL);
    CU_ASSERT_PTR_NULL(sr_stream_hypothesis(NULL));
    CU_ASSERT_PTR_NULL(sr_model_arch(NULL));
    TEST_ASSERT_ERR(sr_model_load(NULL, NULL, &(sr_model *){NULL}), SR_ERR_ARG, "path");
}

static void test_registry(void)
{
    int have_test = 0, have_sync = 0;
    for (size_t i = 0; i < sr_backend_count(); i++)
        have_test |= !strcmp(sr_backend_name(i), "test_linear");
    for (size_t i = 0; i < sr_decoder_count(); i++)
        have_sync |= !strcmp(sr_decoder_name(i), "sync_greedy");
    CU_ASSERT(have_test);
    CU_ASSERT(have_sync);
    CU_ASSERT_PTR_NULL(sr_backend_name(sr_backend_count()));
    CU_ASSERT_PTR_NULL(sr_decoder_name(sr_decoder_count()));
}

static void test_model_load_checks(void)
{
    sr_model *m = (sr_model *)1;
    /* unknown arch: the message names the file, the arch and the known ones */
    TEST_ASSERT_ERR(sr_model_load(test_fixture("bad_unknown_arch.h5"), NULL, &m), SR_ERR_ARG, "no_such_arch");
    CU_ASSERT_PTR_NULL(m);
    TEST_ASSERT_ERR(sr_model_load(test_fixture("bad_unknown_arch.h5"), NULL, &m), SR_ERR_ARG, "test_linear");
    TEST_ASSERT_ERR(sr_model_load(test_fixture("bad_shape.h5"), NULL, &m), SR_ERR_FORMAT, "proj.weight");
    TEST_ASSERT_ERR(sr_model_load(test_fixture("bad_nan.h5"), NULL, &m), SR_ERR_FORMAT, "proj.weight");
    TEST_ASSERT_ERR(sr_model_load(test_fixture("bad_extra_tensor.h5"), NULL, &m), SR_ERR_FORMAT, "extra.weight");
    TEST_ASSERT_ERR(sr_model_load(test_fixture("bad_config_value.h5"), NULL, &m), SR_ERR_FORMAT, "config.n_bands");
    TEST_ASSERT_ERR(sr_model_load("/nonexistent/model.h5", NULL, &m), SR_ERR_IO, "/nonexistent/model.h5");
    sr_options o;
    sr_options_init(&o);
    o.device = "tpu";
    TEST_ASSERT_ERR(sr_model_load(test_fixture("test_linear.h5"), &o, &m), SR_ERR_ARG, "tpu");
    o.device = "cpu";
    o.precision = "fp8";
    TEST_ASSERT_ERR(sr_model_load(test_fixture("test_linear.h5"), &o, &m), SR_ERR_ARG,
                    "test_linear.h5: model option precision \"fp8\" is not \"f32\" or \"bf16\"");
    CU_ASSERT_PTR_NULL(m);
    o.precision = NULL; /* the default */
    CU_ASSERT_EQUAL(sr_model_load(test_fixture("test_linear.h5"), &o, &m), SR_OK);
    sr_model_free(m);
    /* precision bf16 on every stored dtype (i8 stays i8) */
    o.precision = "bf16";
    /* every stored dtype loads and gives a working model */
    const char *ok[] = {"test_linear.h5", "test_linear_f16.h5", "test_linear_bf16.h5", "test_linear_int8.h5"};
    for (size_t i = 0; i < 4; i++) {
        sr_model *mm = NULL;
        for (int bf = 0; bf < 2; bf++) {
            sr_status st = sr_model_load(test_fixture(ok[i]), bf ? &o : NULL, &mm);
            if (st) printf("\n      %s: %s\n", ok[i], sr_last_error());
            CU_ASSERT_EQUAL(st, SR_OK);
            if (!mm) continue;
            CU_ASSERT_STRING_EQUAL(sr_model_arch(mm), "test_linear");
            CU_ASSERT_PTR_NOT_NULL(strstr(sr_model_config(mm), "n_bands"));
            sr_model_free(mm);
            mm = NULL;
        }
    }
}

void test_register_core_api(void)
{
    TEST_SUITE("core_api",
               {"status texts", test_strerror},
               {"error messages are per thread", test_error_thread_local},
               {"free/close of NULL are no-ops", test_null_noops},
               {"registries list backends and decoders", test_registry},
               {"model load: arch, shapes, NaN, unused tensors, device", test_model_load_checks});
}
