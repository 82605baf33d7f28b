/* Runs one of the hand-written `fib`s of this folder: `./fib VARIANT N`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { long value, failed; } Result;
Result fib_fewer(long depth, long n);
Result fib_cranelift(long depth, long n);
Result fib_cranelift_short(long depth, long n);

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: fib fewer|cranelift|cranelift_short N\n"); return 2; }
    long n = atol(argv[2]);
    Result (*f)(long, long) = !strcmp(argv[1], "fewer") ? fib_fewer
        : !strcmp(argv[1], "cranelift") ? fib_cranelift
        : !strcmp(argv[1], "cranelift_short") ? fib_cranelift_short : NULL;
    if (!f) { fprintf(stderr, "no variant %s\n", argv[1]); return 2; }
    Result r = f(1000000, n);
    if (r.failed) { fprintf(stderr, "failed\n"); return 1; }
    printf("%ld\n", r.value);
    return 0;
}
