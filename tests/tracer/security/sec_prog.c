/*
 * sec_prog — the traced program of the security tests (run_security_test.sh):
 *
 *   sec_prog flood N [EXIT]        N tensors of random data (poor compression:
 *                                  fills a small disk), then exits EXIT (0)
 *   sec_prog flood-until STOP READY DONE
 *                                  records random tensors until the file STOP
 *                                  exists; creates READY after the first 1000;
 *                                  at the end writes "ok RECORDED REFUSED" to DONE
 *   sec_prog touch FILE [ARGS...]  records one tensor, creates FILE
 *   sec_prog value V [ARGS...]     records one tensor of 16 elements equal to V
 *                                  (two values: two runs that diverge)
 *   sec_prog named NAME V [ARGS...]  the same, named NAME (names with control
 *                                  characters: the escaping of the outputs)
 *
 * Extra ARGS are ignored: they are there to be recorded (redaction).
 */
#include "tft.h"

#include "tft_test_rng.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float next_float(void) { return tft_test_rng_unit(&rng); }

/* One tensor of 64 random floats: its statistics differ every time. */
static int random_tensor(void)
{
    static float buf[64];
    int64_t n = 64;
    for (int i = 0; i < 64; i++)
        buf[i] = next_float();
    return tft_tensor("noise", TFT_F32, buf, 1, &n);
}

/* Creates path holding text, atomically (a temporary renamed): the test
 * that waits for the file reads it as soon as it appears. */
static void touch(const char *path, const char *text)
{
    char tmp[4200];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (f) {
        fputs(text, f);
        if (fclose(f) == 0)
            rename(tmp, path);
    }
}

int main(int argc, char **argv)
{
    if (argc >= 3 && !strcmp(argv[1], "flood")) {
        long n = atol(argv[2]), refused = 0;
        tft_step_begin(0);
        for (long i = 0; i < n; i++)
            refused += random_tensor() != 0;
        tft_step_end(0);
        printf("sec_prog: %ld tensors, %ld refused by the recorder\n", n, refused);
        return argc >= 4 ? atoi(argv[3]) : 0;
    }
    if (argc >= 5 && !strcmp(argv[1], "flood-until")) {
        long n = 0, refused = 0;
        for (;;) {
            refused += random_tensor() != 0;
            n++;
            if (n == 1000)
                touch(argv[3], "ready\n");
            if (n % 1000 == 0 && access(argv[2], F_OK) == 0)
                break;
            if (n % 1000 == 0 && n > 1000)
                usleep(1000); /* a steady stream, not a busy machine */
        }
        char buf[128];
        snprintf(buf, sizeof(buf), "ok %ld %ld\n", n, refused);
        touch(argv[4], buf);
        return 0;
    }
    if (argc >= 3 && !strcmp(argv[1], "touch")) {
        random_tensor();
        touch(argv[2], "ran\n");
        return 0;
    }
    if (argc >= 3 && (!strcmp(argv[1], "value") || (argc >= 4 && !strcmp(argv[1], "named")))) {
        bool named = argv[1][0] == 'n';
        float buf[16];
        int64_t n = 16;
        for (int i = 0; i < 16; i++)
            buf[i] = (float)atof(argv[named ? 3 : 2]);
        return tft_tensor(named ? argv[2] : "v", TFT_F32, buf, 1, &n) != 0;
    }
    fprintf(stderr, "usage: sec_prog flood N [EXIT] | flood-until STOP READY DONE | touch FILE | value V | named NAME V\n");
    return 2;
}
