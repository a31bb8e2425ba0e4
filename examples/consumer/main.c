/* A program that runs a tkexport package: opens the .tkpkg that tkexport_add_package builds
 * (CMakeLists.txt), runs it on the CPU on a fixed bf16 input and prints a checksum of the output.
 *
 *   consumer PACKAGE.tkpkg [BATCH]      (BATCH: the size of the input's dynamic dims, default 4)
 *
 * Exit status: 0 done, 1 failed (the runtime's one-line message on stderr), 2 usage. */
#include <stdio.h>
#include <stdlib.h>
#include <tk/half.h>
#include <tk/runtime.h>

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: consumer PACKAGE.tkpkg [BATCH]\n");
        return 2;
    }
    const tk_device cpu = {TK_DEVICE_CPU, 0};
    int64_t batch = 4;
    if (argc == 3) {
        char *end;
        batch = strtoll(argv[2], &end, 10);
        if (*end || end == argv[2] || batch < 1) {
            fprintf(stderr, "consumer: BATCH must be a whole number of at least 1, not '%s'\n", argv[2]);
            return 2;
        }
    }
    tk_package *pkg = NULL;
    tk_session *session = NULL;
    tk_tensor *x = NULL, *y = NULL;

    int rc = tk_package_open(&pkg, argv[1]);
    if (rc)
        goto done;
    rc = tk_session_new(&session, pkg, cpu);
    if (rc)
        goto done;

    /* The program's one bf16 input: its dynamic dims take BATCH, the others their fixed size. */
    const tk_io_info *in = tk_package_input(pkg, 0);
    if (tk_package_num_inputs(pkg) != 1 || tk_package_num_outputs(pkg) != 1 || in->dtype != TK_BF16) {
        rc = tk_error_set(TK_EINVAL, "'%s': expected one bf16 input and one output", argv[1]);
        goto done;
    }
    int64_t shape[TK_MAX_DIMS];
    for (int d = 0; d < in->rank; d++)
        shape[d] = in->dims[d].sym ? batch : in->dims[d].value;
    rc = tk_tensor_new(&x, NULL, cpu, TK_BF16, in->rank, shape);
    if (rc)
        goto done;
    uint16_t *xs = tk_tensor_data(x);
    for (int64_t i = 0; i < tk_numel(x); i++)
        xs[i] = tk_f32_to_bf16((float)(i * 37 % 101 - 50) / 50.0f); /* the same on every machine */

    /* y is allocated by the run (a NULL slot); a CPU session is done when tk_session_run returns */
    rc = tk_session_run(session, &x, 1, &y, 1);
    if (rc)
        goto done;
    const uint16_t *ys = tk_tensor_data(y);
    double sum = 0, abs_sum = 0;
    for (int64_t i = 0; i < tk_numel(y); i++) {
        float v = tk_bf16_to_f32(ys[i]);
        sum += v;
        abs_sum += v < 0 ? -v : v;
    }
    printf("%s: program '%s': output 0 has %lld values, sum %.6f, sum of |y| %.6f\n", argv[1],
           tk_package_program(pkg), (long long)tk_numel(y), sum, abs_sum);

done:
    if (rc)
        fprintf(stderr, "consumer: %s\n", tk_error_last());
    tk_tensor_free(y);
    tk_tensor_free(x);
    tk_session_free(session);
    tk_package_close(pkg);
    return rc ? 1 : 0;
}
