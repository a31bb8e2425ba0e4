/* What libtkrt exports. libtkrt is compiled with -fvisibility=hidden; each public header wraps its
 * declarations in TK_API_BEGIN ... TK_API_END (or marks one with TK_API), which gives them default
 * visibility, so the library's ABI is include/tk and nothing else (tests/check_abi.cmake checks
 * that the exported symbols are exactly the functions these headers declare). */
#ifndef TK_EXPORT_H
#define TK_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define TK_API __attribute__((visibility("default")))
#define TK_API_BEGIN _Pragma("GCC visibility push(default)")
#define TK_API_END _Pragma("GCC visibility pop")
#else
#define TK_API
#define TK_API_BEGIN
#define TK_API_END
#endif

#endif
