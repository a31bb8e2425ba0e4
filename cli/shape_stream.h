/* Streams of input shapes over a package's dynamic dimensions, to time a package the way a
 * server calls it (tkexport run --shapes, bench/serving): the symbols and their ranges read from
 * the package's inputs; the symbols' values for each call (cycled over 8 sizes, drawn uniformly,
 * or read from a list); device buffers at the largest shapes, filled once with random values, and
 * per call views of that call's shapes over them, so a call is tk_session_run alone. Written on
 * libtkrt's public API only: bench/serving compiles it too. */
#ifndef TK_SHAPE_STREAM_H
#define TK_SHAPE_STREAM_H

#include <stddef.h>
#include <stdint.h>
#include <tk/runtime.h>

#define SHAPES_MAX_SYMS 16
#define SHAPES_CYCLE_SIZES 8

typedef enum shape_stream_kind {
    SHAPES_FIXED,   /* the caller's own shapes (tkexport run's --input); not a stream here */
    SHAPES_CYCLE,   /* SHAPES_CYCLE_SIZES sizes per symbol, geometric over its range, in turn */
    SHAPES_UNIFORM, /* every symbol uniform in its range, drawn anew each call */
    SHAPES_LIST     /* the rows of a list ("batch=16 seq=128", one call a row), in turn */
} shape_stream_kind;

/* "fixed", "cycle", "uniform" or "file:PATH" (*path then points at PATH, else NULL): 0, or -1
 * for anything else. */
int shape_stream_parse(shape_stream_kind *kind, const char **path, const char *text);
const char *shape_stream_kind_name(shape_stream_kind kind);

typedef struct shape_stream {
    shape_stream_kind kind;
    size_t nsyms;
    const char *names[SHAPES_MAX_SYMS]; /* the package's strings */
    int64_t min[SHAPES_MAX_SYMS], max[SHAPES_MAX_SYMS];
    int64_t *rows; /* cycle and list: nrows x nsyms values */
    size_t nrows, next;
    uint64_t rng;
    uint64_t *seen; /* hashes of the value vectors seen (open addressing, 0 = empty) */
    size_t seen_cap, seen_count;
} shape_stream;

/* The stream of kind over pkg's inputs: every dynamic dim must be a bare symbol (not an
 * expression such as 2*batch). list is SHAPES_LIST's text: rows separated by newlines or ';',
 * each naming every symbol once as NAME=VALUE (separated by spaces or commas; '#' starts a
 * comment), each value inside its range. seed drives SHAPES_UNIFORM. 0, or -1 with a one-line
 * message in err. */
int shape_stream_init(shape_stream *s, const tk_package *pkg, shape_stream_kind kind, const char *list, uint64_t seed,
                      char *err, size_t errlen);
void shape_stream_release(shape_stream *s);
/* The next call's value of each symbol (nsyms of them). */
void shape_stream_next(shape_stream *s, int64_t *values);
/* 1 the first time a vector of values is given (it is remembered), else 0. -1: out of memory. */
int shape_stream_first_time(shape_stream *s, const int64_t *values);
/* "batch in [1, 1024]", "batch in [1, 64], seq in [1, 512]", or "no dynamic dims". */
void shape_stream_describe(const shape_stream *s, char *buf, size_t n);
/* "batch=16 seq=3" */
void shape_stream_format(const shape_stream *s, const int64_t *values, char *buf, size_t n);
/* The shape of io for the values: 0, or -1 when a dim is an expression or a symbol the stream
 * does not know. */
int shape_stream_shape(const shape_stream *s, const tk_io_info *io, const int64_t *values, int64_t *shape);

/* Inputs (and outputs whose dims are constants or bare symbols) at their largest shapes on the
 * session's device; the inputs filled with random values once. */
typedef struct shape_buffers {
    size_t nin, nout;
    tk_tensor **in;  /* nin */
    tk_tensor **out; /* nout; NULL where the output's shape is an expression: the runtime allocates it */
} shape_buffers;

int shape_buffers_init(shape_buffers *b, const shape_stream *s, const tk_package *pkg, tk_session *session,
                       uint64_t seed);
/* Views of the call's shapes over the buffers into in[] and out[] (NULL where the runtime
 * allocates); unbind frees the views and any output the runtime made. */
int shape_buffers_bind(const shape_buffers *b, const shape_stream *s, const tk_package *pkg, const int64_t *values,
                       tk_tensor **in, tk_tensor **out);
void shape_buffers_unbind(const shape_buffers *b, tk_tensor **in, tk_tensor **out);
void shape_buffers_release(shape_buffers *b);

/* Pseudo-random values of t's dtype (a CPU tensor): uniform in [-1, 1), integers in [0, 16),
 * from the seed and the name; the same seed and name give the same values. */
void shape_fill_random(tk_tensor *t, const char *name, uint64_t seed);

#endif
