/* shoal bench micro --target c: the OSU loops in C, on the same MPI library as mpi4py.
 *
 * The native floor that the Python targets are measured against. Python decides
 * everything (sizes, iteration counts, output text around the rows) and passes it on
 * the command line; this program runs the loops, checks the data with the same
 * patterns as shoal/bench/micro/data.py, and prints the rows.
 *
 *   shoal-micro FORMAT WINDOW VALIDATE CORRUPT  {TEST SIZES COUNTS PREAMBLE ROWPREFIX}...
 *
 * FORMAT is text, csv or json; SIZES "1,16,256"; COUNTS "iters:warmup,..." (one per
 * size); PREAMBLE is printed before the rows (JSON: up to the opening "["); ROWPREFIX
 * starts each CSV row. Exit code 1 if validation failed on any PE.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define POISON 0xA5
#define MAX_SIZES 64

static int rank, npes, window_size, validate, corrupt, failures;
static const char *format;

/* -- patterns (the same as data.py) ------------------------------------------------ */
static void block(unsigned char *out, long nbytes, int src, int dst) {
    long seed = (long)src * 31 + (long)dst * 17 + 1;
    for (long i = 0; i < nbytes; i++) out[i] = (unsigned char)((i * 7 + seed) % 251);
}

static void fblock(float *out, long count, int src) {
    for (long i = 0; i < count; i++) out[i] = (float)((i + 5L * src) % 13 + 1);
}

static int partner(int r) { int half = npes / 2; return r < half ? r + half : r - half; }

static long split_count(long count, int r) { return count / npes + (r < count % npes ? 1 : 0); }

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) { fprintf(stderr, "shoal-micro: PE %d: out of memory (%zu bytes)\n", rank, n); MPI_Abort(MPI_COMM_WORLD, 1); }
    return p;
}

static unsigned char *poisoned(size_t n) { unsigned char *p = xmalloc(n); memset(p, POISON, n); return p; }

static void check(const char *test, long size, const void *got, const void *want, long nbytes) {
    if (!validate) return;
    const unsigned char *g = got, *w = want;
    long bad = 0, first = -1;
    unsigned char gb = 0;
    for (long i = 0; i < nbytes; i++) {
        unsigned char b = g[i];
        if (corrupt && i == nbytes / 2) b ^= 0xFF;
        if (b != w[i]) { if (first < 0) { first = i; gb = b; } bad++; }
    }
    if (bad) {
        failures++;
        fprintf(stderr, "shoal bench micro: validation failed: %s %ld B on PE %d: %ld of %ld bytes differ, "
                "first at byte %ld (got %#04x, expected %#04x)\n", test, size, rank, bad, nbytes, first, gb, w[first]);
    }
}

/* -- point-to-point ------------------------------------------------------------------ */
static double pingpong(const char *test, long size, int iters, int warm) {
    int peer = partner(rank), leads = rank < peer;
    unsigned char *s = xmalloc(size), *r = poisoned(size), *w = xmalloc(size);
    block(s, size, rank, peer);
    double t0 = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters + warm; i++) {
        if (i == warm) t0 = MPI_Wtime();
        if (leads) {
            MPI_Send(s, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
            MPI_Recv(r, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(r, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(s, (int)size, MPI_CHAR, peer, 1, MPI_COMM_WORLD);
        }
    }
    double elapsed = MPI_Wtime() - t0;
    block(w, size, peer, rank);
    check(test, size, r, w, size);
    free(s); free(r); free(w);
    return elapsed * 1e6 / (2.0 * iters);
}

static double bandwidth(const char *test, long size, int iters, int warm, int bidir) {
    int peer = partner(rank);
    unsigned char *s = xmalloc(size), *r = poisoned(size), *w = xmalloc(size), ack = 0;
    MPI_Request *reqs = xmalloc(sizeof(MPI_Request) * 2 * window_size);
    block(s, size, rank, peer);
    double t0 = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters + warm; i++) {
        if (i == warm) t0 = MPI_Wtime();
        if (bidir) {
            for (int j = 0; j < window_size; j++) MPI_Irecv(r, (int)size, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &reqs[j]);
            for (int j = 0; j < window_size; j++) MPI_Isend(s, (int)size, MPI_CHAR, peer, 100, MPI_COMM_WORLD, &reqs[window_size + j]);
            MPI_Waitall(2 * window_size, reqs, MPI_STATUSES_IGNORE);
        } else if (rank == 0) {
            for (int j = 0; j < window_size; j++) MPI_Isend(s, (int)size, MPI_CHAR, 1, 100, MPI_COMM_WORLD, &reqs[j]);
            MPI_Waitall(window_size, reqs, MPI_STATUSES_IGNORE);
            MPI_Recv(&ack, 1, MPI_CHAR, 1, 101, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else {
            for (int j = 0; j < window_size; j++) MPI_Irecv(r, (int)size, MPI_CHAR, 0, 100, MPI_COMM_WORLD, &reqs[j]);
            MPI_Waitall(window_size, reqs, MPI_STATUSES_IGNORE);
            MPI_Send(&ack, 1, MPI_CHAR, 0, 101, MPI_COMM_WORLD);
        }
    }
    double elapsed = MPI_Wtime() - t0;
    if (bidir || rank == 1) { block(w, size, peer, rank); check(test, size, r, w, size); }
    free(s); free(r); free(w); free(reqs);
    return size / 1e6 * iters * window_size * (bidir ? 2 : 1) / elapsed;
}

/* -- collectives --------------------------------------------------------------------- */
enum { ALLGATHER, ALLREDUCE, ALLTOALL, BARRIER, BCAST, GATHER, REDUCE_SCATTER, REDUCE, SCATTER,
       ALLGATHERV, ALLTOALLV, GATHERV, SCATTERV, NCOLL };
static const char *coll_names[NCOLL] = {"allgather", "allreduce", "alltoall", "barrier", "bcast", "gather",
    "reduce_scatter", "reduce", "scatter", "allgatherv", "alltoallv", "gatherv", "scatterv"};

static double collective(int op, long size, int iters, int warm) {
    const char *name = coll_names[op];
    long count = size / 4, n = npes, whole = size * n;
    unsigned char *s = NULL, *r = NULL, *w = NULL;
    long sbytes = 0, rbytes = 0;
    int *counts = xmalloc(sizeof(int) * n), *displs = xmalloc(sizeof(int) * n);
    for (int d = 0; d < n; d++) { counts[d] = (int)size; displs[d] = (int)(d * size); }
    int is_float = op == ALLREDUCE || op == REDUCE || op == REDUCE_SCATTER;
    if (is_float) {
        sbytes = count * 4;
        s = xmalloc(sbytes);
        fblock((float *)s, count, rank);
        if (op == REDUCE_SCATTER) {
            for (int d = 0; d < n; d++) counts[d] = (int)split_count(count, d);
            rbytes = counts[rank] * 4L;
        } else {
            rbytes = sbytes;
        }
    } else if (op == SCATTER || op == SCATTERV || op == ALLTOALL || op == ALLTOALLV) {
        sbytes = whole;
        s = xmalloc(sbytes);
        for (int d = 0; d < n; d++) block(s + d * size, size, rank, d);
        rbytes = (op == ALLTOALL || op == ALLTOALLV) ? whole : size;
    } else {
        sbytes = size;
        s = xmalloc(sbytes);
        block(s, size, rank, 0);
        rbytes = (op == BCAST) ? size : whole;
    }
    r = poisoned(rbytes);
    void *bc = (op == BCAST && rank == 0) ? (void *)s : (void *)r;
    double timer = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    for (int i = 0; i < iters + warm; i++) {
        double t0 = MPI_Wtime();
        switch (op) {
        case ALLGATHER: MPI_Allgather(s, (int)size, MPI_CHAR, r, (int)size, MPI_CHAR, MPI_COMM_WORLD); break;
        case ALLREDUCE: MPI_Allreduce(s, r, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
        case ALLTOALL: MPI_Alltoall(s, (int)size, MPI_CHAR, r, (int)size, MPI_CHAR, MPI_COMM_WORLD); break;
        case BARRIER: MPI_Barrier(MPI_COMM_WORLD); break;
        case BCAST: MPI_Bcast(bc, (int)size, MPI_CHAR, 0, MPI_COMM_WORLD); break;
        case GATHER: MPI_Gather(s, (int)size, MPI_CHAR, r, (int)size, MPI_CHAR, 0, MPI_COMM_WORLD); break;
        case REDUCE_SCATTER: MPI_Reduce_scatter(s, r, counts, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
        case REDUCE: MPI_Reduce(s, r, (int)count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD); break;
        case SCATTER: MPI_Scatter(s, (int)size, MPI_CHAR, r, (int)size, MPI_CHAR, 0, MPI_COMM_WORLD); break;
        case ALLGATHERV: MPI_Allgatherv(s, (int)size, MPI_CHAR, r, counts, displs, MPI_CHAR, MPI_COMM_WORLD); break;
        case ALLTOALLV: MPI_Alltoallv(s, counts, displs, MPI_CHAR, r, counts, displs, MPI_CHAR, MPI_COMM_WORLD); break;
        case GATHERV: MPI_Gatherv(s, (int)size, MPI_CHAR, r, counts, displs, MPI_CHAR, 0, MPI_COMM_WORLD); break;
        case SCATTERV: MPI_Scatterv(s, counts, displs, MPI_CHAR, r, (int)size, MPI_CHAR, 0, MPI_COMM_WORLD); break;
        }
        double t1 = MPI_Wtime();
        if (i >= warm) timer += t1 - t0;
        MPI_Barrier(MPI_COMM_WORLD);
    }
    /* what this PE must hold */
    int receives = 1;
    w = xmalloc(rbytes);
    if (is_float) {
        float *sum = xmalloc(sizeof(float) * (count ? count : 1)), *part = xmalloc(sizeof(float) * (count ? count : 1));
        memset(sum, 0, sizeof(float) * count);
        for (int src = 0; src < n; src++) { fblock(part, count, src); for (long i = 0; i < count; i++) sum[i] += part[i]; }
        long lo = 0;
        if (op == REDUCE_SCATTER) for (int d = 0; d < rank; d++) lo += counts[d];
        memcpy(w, sum + lo, rbytes);
        receives = op != REDUCE || rank == 0;
        free(sum); free(part);
    } else if (op == ALLGATHER || op == ALLGATHERV || op == GATHER || op == GATHERV) {
        for (int src = 0; src < n; src++) block(w + src * size, size, src, 0);
        receives = (op == ALLGATHER || op == ALLGATHERV) || rank == 0;
    } else if (op == ALLTOALL || op == ALLTOALLV) {
        for (int src = 0; src < n; src++) block(w + src * size, size, src, rank);
    } else if (op == SCATTER || op == SCATTERV) {
        block(w, size, 0, rank);
    } else if (op == BCAST) {
        block(w, size, 0, 0);
        receives = rank != 0;
    } else {
        receives = 0;
    }
    if (receives) check(name, size, r, w, rbytes);
    free(s); free(r); free(w); free(counts); free(displs);
    double lat = timer * 1e6 / iters, total = 0;
    MPI_Reduce(&lat, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    return total / n;
}

/* -- driver -------------------------------------------------------------------------- */
static int parse_list(const char *text, long *out, int *out2) {
    /* "1,16,256" into out; "10:2,3:1" into out (before ':') and out2 (after) */
    int k = 0;
    const char *p = text;
    while (*p && k < MAX_SIZES) {
        char *end;
        out[k] = strtol(p, &end, 10);
        if (end == p) break;
        if (out2 && *end == ':') { p = end + 1; out2[k] = (int)strtol(p, &end, 10); }
        k++;
        if (*end != ',') break;
        p = end + 1;
    }
    return k;
}

static void emit_row(const char *test, const char *prefix, long size, double value, int iters, int first, int sized) {
    if (rank != 0) return;
    if (!strcmp(format, "json")) printf("%s{\"size\": %ld, \"value\": %.6f, \"iterations\": %d}", first ? "" : ", ", size, value, iters);
    else if (!strcmp(format, "csv")) printf("%s%ld,%.6f,%d\n", prefix, size, value, iters);
    else if (sized) printf("%-10ld%18.2f\n", size, value);
    else printf("%17.2f\n", value);
    fflush(stdout);
    (void)test;
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &npes);
    if (argc < 5 || (argc - 5) % 5) {
        if (rank == 0) fprintf(stderr, "usage: %s FORMAT WINDOW VALIDATE CORRUPT {TEST SIZES COUNTS PREAMBLE ROWPREFIX}...\n", argv[0]);
        MPI_Finalize();
        return 2;
    }
    format = argv[1];
    window_size = atoi(argv[2]);
    validate = atoi(argv[3]);
    corrupt = atoi(argv[4]);
    char failed_tests[1024] = "";
    int ntests = 0;
    for (int a = 5; a < argc; a += 5) {
        const char *test = argv[a];
        long sizes[MAX_SIZES];
        long iters_l[MAX_SIZES];
        int warms[MAX_SIZES];
        int nsizes = parse_list(argv[a + 1], sizes, NULL);
        int ncounts = parse_list(argv[a + 2], iters_l, warms);
        if (ncounts != nsizes) {
            if (rank == 0) fprintf(stderr, "shoal-micro: %s: %d sizes but %d counts\n", test, nsizes, ncounts);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        int op = -1;
        for (int k = 0; k < NCOLL; k++) if (!strcmp(test, coll_names[k])) op = k;
        int p2p = !strcmp(test, "latency") || !strcmp(test, "multi_lat") || !strcmp(test, "bw") || !strcmp(test, "bibw");
        if (op < 0 && !p2p) {
            if (rank == 0) fprintf(stderr, "shoal-micro: unknown test %s\n", test);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        if (rank == 0) { fputs(argv[a + 3], stdout); fflush(stdout); }
        int before = failures;
        for (int k = 0; k < nsizes; k++) {
            long size = sizes[k];
            int iters = (int)iters_l[k], warm = warms[k];
            double value;
            if (!strcmp(test, "latency")) value = pingpong(test, size, iters, warm);
            else if (!strcmp(test, "multi_lat")) {
                double lat = pingpong(test, size, iters, warm), total = 0;
                MPI_Reduce(&lat, &total, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
                value = total / npes;
            } else if (!strcmp(test, "bw")) value = bandwidth(test, size, iters, warm, 0);
            else if (!strcmp(test, "bibw")) value = bandwidth(test, size, iters, warm, 1);
            else value = collective(op, size, iters, warm);
            emit_row(test, argv[a + 4], size, value, iters, k == 0, op != BARRIER);
        }
        if (rank == 0 && !strcmp(format, "json")) { printf("]}\n"); fflush(stdout); }
        int mine = failures - before, any = 0;
        MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        if (any && strlen(failed_tests) + strlen(test) + 3 < sizeof failed_tests) {
            if (*failed_tests) strcat(failed_tests, ", ");
            strcat(failed_tests, test);
        }
        ntests++;
    }
    int code = 0;
    if (*failed_tests) {
        code = 1;
        if (rank == 0) fprintf(stderr, "shoal bench micro: validation FAILED in %s\n", failed_tests);
    } else if (validate && rank == 0) {
        fprintf(stderr, "shoal bench micro: validation passed (%d tests)\n", ntests);
    }
    MPI_Finalize();
    return code;
}
