/* Umbrella header: everything public of tkexport. */
#ifndef TK_TK_H
#define TK_TK_H
#include <tk/error.h>
#include <tk/op.h>
#endif
