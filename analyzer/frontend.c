/* The libclang front end: parses one translation unit and writes its summary (ops, kernels,
 * launches, calls, returns, assignments, initializers) as described in internal.h. */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "sha256.h"
#include <tk/error.h>

/* Deeper expressions than this are summarized as unknown: clang itself caps bracket nesting at
 * 256, and our conversion recurses once per level. */
#define MAX_EXPR_DEPTH 96

/* What one file defines: the translation unit's own summary, or the part for one header. */
typedef struct unit {
    CXFile file;
    cJSON *sum;
    int skip; /* a system header or tkexport's own: never summarized */
} unit;

typedef struct extract {
    CXTranslationUnit tu;
    CXFile mainf;
    CXFile curf;                                 /* the file of the definition being summarized */
    cJSON *funcs, *globals, *kernels, *handles, *tunes; /* that file's lists */
    const char *own_include;
    unit *units;
    size_t nunits, capunits;
    cJSON *internal;                             /* [usr, unit] of internal definitions in headers */
    tk_map internal_unit;                        /* usr -> that pair */
} extract;

/* The function whose body is being visited. */
typedef struct fnstate {
    extract *x;
    cJSON *usr;
    cJSON *launches, *calls, *opcalls, *rets, *locals, *raw, *stores, *escapes;
    CXCursor params[64];
    int nparams;
    int returns_interesting;
    int is_op;          /* an op body: in/out indexing and argument provenance are recorded */
    int in_max, out_max; /* highest constant index of in[] / out[], -1 when unused */
    int dyn_index;      /* in[] or out[] indexed by a non-constant */
} fnstate;

static char *str_take(CXString s)
{
    const char *c = clang_getCString(s);
    char *r = strdup(c ? c : "");
    clang_disposeString(s);
    return r;
}

static void add_str(cJSON *obj, const char *key, CXString s)
{
    const char *c = clang_getCString(s);
    cJSON_AddStringToObject(obj, key, c ? c : "");
    clang_disposeString(s);
}

/* Line and column where the user wrote the construct (the macro use for expanded code). */
static void cursor_pos(CXCursor c, CXFile *file, unsigned *line, unsigned *col)
{
    clang_getExpansionLocation(clang_getCursorLocation(c), file, line, col, NULL);
}

static char *file_path(CXFile f)
{
    char *real = str_take(clang_File_tryGetRealPathName(f));
    if (!*real) {
        free(real);
        real = str_take(clang_getFileName(f));
    }
    return real;
}

static cJSON *new_summary(const char *path)
{
    cJSON *s = cJSON_CreateObject();
    cJSON_AddNumberToObject(s, "v", TK_SUMMARY_VERSION);
    cJSON_AddStringToObject(s, "path", path);
    cJSON_AddArrayToObject(s, "diags");
    cJSON_AddArrayToObject(s, "kernels");
    cJSON_AddArrayToObject(s, "handles");
    cJSON_AddArrayToObject(s, "funcs");
    cJSON_AddArrayToObject(s, "globals");
    cJSON_AddArrayToObject(s, "tunes");
    return s;
}

static int add_unit(extract *x, CXFile f, cJSON *sum, int skip)
{
    if (x->nunits == x->capunits) {
        size_t cap = x->capunits ? x->capunits * 2 : 8;
        unit *u = realloc(x->units, cap * sizeof(*u));
        if (!u)
            return -1;
        x->units = u;
        x->capunits = cap;
    }
    x->units[x->nunits].file = f;
    x->units[x->nunits].sum = sum;
    x->units[x->nunits].skip = skip;
    return (int)x->nunits++;
}

static void select_unit(extract *x, const unit *u)
{
    x->curf = u->file;
    x->funcs = cJSON_GetObjectItemCaseSensitive(u->sum, "funcs");
    x->globals = cJSON_GetObjectItemCaseSensitive(u->sum, "globals");
    x->kernels = cJSON_GetObjectItemCaseSensitive(u->sum, "kernels");
    x->handles = cJSON_GetObjectItemCaseSensitive(u->sum, "handles");
    x->tunes = cJSON_GetObjectItemCaseSensitive(u->sum, "tunes");
}

/* Makes the file where c was written the one being summarized: the main file, or a header
 * reached through includes (its definitions read with the includer's language, flags and
 * macros). 0 for a system header, tkexport's own, or no file. */
static int enter_file(extract *x, CXCursor c)
{
    CXFile f;
    cursor_pos(c, &f, NULL, NULL);
    if (!f)
        return 0;
    for (size_t i = 0; i < x->nunits; i++)
        if (clang_File_isEqual(f, x->units[i].file)) {
            if (!x->units[i].skip)
                select_unit(x, &x->units[i]);
            return !x->units[i].skip;
        }
    char *path = file_path(f);
    size_t own = x->own_include ? strlen(x->own_include) : 0;
    CXSourceLocation loc = clang_getCursorLocation(c);
    int skip = clang_Location_isInSystemHeader(loc) ||
               (own && strncmp(path, x->own_include, own) == 0 && path[own] == '/');
    cJSON *sum = skip ? NULL : new_summary(path);
    free(path);
    int i = add_unit(x, f, sum, skip);
    if (i < 0 || (!skip && !sum)) {
        cJSON_Delete(sum);
        return 0;
    }
    if (!skip)
        select_unit(x, &x->units[i]);
    return !skip;
}

/* A definition with internal linkage in a header is one per includer: its USR gets the
 * header's configuration (below), so includers that see different code keep apart. */
static void note_internal(extract *x, CXCursor decl, const char *usr)
{
    CXFile f;
    cursor_pos(decl, &f, NULL, NULL);
    if (!f || clang_File_isEqual(f, x->mainf) || clang_getCursorLinkage(decl) != CXLinkage_Internal ||
        tk_map_get(&x->internal_unit, usr))
        return;
    size_t u = 0;
    while (u < x->nunits && !clang_File_isEqual(x->units[u].file, f))
        u++;
    if (u == x->nunits || x->units[u].skip)
        return;
    cJSON *pair = cJSON_CreateArray();
    cJSON_AddItemToArray(pair, cJSON_CreateString(usr));
    cJSON_AddItemToArray(pair, cJSON_CreateNumber((double)u));
    cJSON_AddItemToArray(x->internal, pair);
    tk_map_put(&x->internal_unit, cJSON_GetArrayItem(pair, 0)->valuestring, pair);
}

static unsigned cursor_line(CXCursor c)
{
    unsigned line = 0;
    cursor_pos(c, NULL, &line, NULL);
    return line;
}

/* Where the user wrote c: its spelling when that is in the file being summarized (an argument
 * of a macro such as tk_wrap, on its own line), else the macro use. */
static unsigned user_pos(CXFile summarized, CXCursor c, unsigned *col)
{
    CXFile f;
    unsigned line = 0;
    clang_getSpellingLocation(clang_getCursorLocation(c), &f, &line, col, NULL);
    if (!f || !summarized || !clang_File_isEqual(f, summarized))
        clang_getExpansionLocation(clang_getCursorLocation(c), NULL, &line, col, NULL);
    return line;
}

/* Children of a cursor, for the few places that need them by position. */
typedef struct kids {
    CXCursor c[16];
    int n;
} kids;

static enum CXChildVisitResult collect_kid(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    kids *k = data;
    if (k->n < 16)
        k->c[k->n] = c;
    k->n++;
    return CXChildVisit_Continue;
}

static void get_kids(CXCursor c, kids *k)
{
    k->n = 0;
    clang_visitChildren(c, collect_kid, k);
    if (k->n > 16)
        k->n = 16;
}

/* The expression children only (casts and declarations also have TypeRef children). */
static void get_expr_kids(CXCursor c, kids *k)
{
    kids all;
    get_kids(c, &all);
    k->n = 0;
    for (int i = 0; i < all.n; i++)
        if (clang_isExpression(clang_getCursorKind(all.c[i])))
            k->c[k->n++] = all.c[i];
}

typedef struct annot_search {
    const char *prefix;
    char *value;
} annot_search;

static enum CXChildVisitResult find_annot(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    annot_search *s = data;
    if (clang_getCursorKind(c) != CXCursor_AnnotateAttr)
        return CXChildVisit_Continue;
    CXString sp = clang_getCursorSpelling(c);
    const char *t = clang_getCString(sp);
    size_t n = strlen(s->prefix);
    if (t && strncmp(t, s->prefix, n) == 0 && !s->value) {
        s->value = strdup(t + n);
        clang_disposeString(sp);
        return CXChildVisit_Break;
    }
    clang_disposeString(sp);
    return CXChildVisit_Continue;
}

/* The text after prefix of the first annotate("prefix...") on decl, malloc'd, or NULL. */
static char *annotation(CXCursor decl, const char *prefix)
{
    annot_search s = {prefix, NULL};
    clang_visitChildren(decl, find_annot, &s);
    return s.value;
}

/* Values that can carry a kernel handle, a function or an aggregate holding them. Integers and
 * floats cannot, so their assignments are not recorded. */
static int interesting_type(CXType t)
{
    t = clang_getCanonicalType(t);
    switch (t.kind) {
    case CXType_Pointer:
    case CXType_Record:
    case CXType_ConstantArray:
    case CXType_IncompleteArray:
    case CXType_VariableArray:
    case CXType_FunctionProto:
    case CXType_FunctionNoProto:
    case CXType_LValueReference:
    case CXType_RValueReference:
        return 1;
    default:
        return 0;
    }
}

static cJSON *mk(const char *tag)
{
    cJSON *a = cJSON_CreateArray();
    cJSON_AddItemToArray(a, cJSON_CreateString(tag));
    return a;
}

static cJSON *unknown(fnstate *fs, CXCursor at, const char *fmt, const char *what)
{
    char msg[256];
    snprintf(msg, sizeof(msg), fmt, what);
    cJSON *a = mk("?");
    unsigned col = 0, line = user_pos(fs ? fs->x->curf : NULL, at, &col);
    cJSON_AddItemToArray(a, cJSON_CreateString(msg));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(line));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(col));
    return a;
}

/* An identifier for a local variable, unique within its function: its declaration's offset. */
static cJSON *local_id(CXCursor decl)
{
    unsigned off = 0;
    clang_getSpellingLocation(clang_getCursorLocation(decl), NULL, NULL, NULL, &off);
    char buf[32];
    snprintf(buf, sizeof(buf), "v%u", off);
    return cJSON_CreateString(buf);
}

static int param_index(fnstate *fs, CXCursor decl)
{
    for (int i = 0; fs && i < fs->nparams; i++)
        if (clang_equalCursors(fs->params[i], decl))
            return i;
    return -1;
}

static int is_global_var(CXCursor decl)
{
    enum CXCursorKind pk = clang_getCursorKind(clang_getCursorSemanticParent(decl));
    return pk == CXCursor_TranslationUnit || pk == CXCursor_Namespace ||
           pk == CXCursor_LinkageSpec || pk == CXCursor_UnexposedDecl;
}

static cJSON *conv(fnstate *fs, CXCursor c, int depth);

static cJSON *conv_ref(fnstate *fs, CXCursor c)
{
    CXCursor ref = clang_getCursorReferenced(c);
    enum CXCursorKind rk = clang_getCursorKind(ref);
    CXString name = clang_getCursorSpelling(ref);
    cJSON *r = NULL;
    if (rk == CXCursor_VarDecl) {
        char *a = annotation(ref, "tk.kernel_decl");
        if (a) {
            r = mk("k");
            cJSON_AddItemToArray(r, cJSON_CreateString(clang_getCString(name)));
            free(a);
        } else if (is_global_var(ref)) {
            r = mk("g");
            char *usr = str_take(clang_getCursorUSR(ref));
            cJSON_AddItemToArray(r, cJSON_CreateString(usr));
            free(usr);
            cJSON_AddItemToArray(r, cJSON_CreateString(clang_getCString(name)));
        } else {
            r = mk("l");
            cJSON_AddItemToArray(r, local_id(ref));
            cJSON_AddItemToArray(r, cJSON_CreateString(clang_getCString(name)));
        }
    } else if (rk == CXCursor_ParmDecl) {
        int i = param_index(fs, ref);
        if (i >= 0) {
            r = mk("p");
            cJSON_AddItemToArray(r, cJSON_CreateNumber(i));
        } else {
            r = unknown(fs, c, "unknown value: parameter '%s' of another function", clang_getCString(name));
        }
    } else if (rk == CXCursor_FunctionDecl || rk == CXCursor_CXXMethod || rk == CXCursor_FunctionTemplate) {
        /* a template's specialization (helper<int>) is the template: one summary for all */
        CXCursor tmpl = clang_getSpecializedCursorTemplate(ref);
        if (!clang_Cursor_isNull(tmpl)) {
            ref = tmpl;
            clang_disposeString(name);
            name = clang_getCursorSpelling(ref);
        }
        r = mk("f");
        char *usr = str_take(clang_getCursorUSR(ref));
        cJSON_AddItemToArray(r, cJSON_CreateString(usr));
        free(usr);
        cJSON_AddItemToArray(r, cJSON_CreateString(clang_getCString(name)));
    } else {
        r = mk("x");
    }
    clang_disposeString(name);
    return r;
}

/* The value of an integer constant expression (literals, enum constants, arithmetic on them)
 * in *out; 0 when c is not one. */
static int const_index(CXCursor c, long long *out)
{
    CXEvalResult ev = clang_Cursor_Evaluate(c);
    int ok = 0;
    if (ev) {
        if (clang_EvalResult_getKind(ev) == CXEval_Int) {
            *out = clang_EvalResult_getAsLongLong(ev);
            ok = 1;
        }
        clang_EvalResult_dispose(ev);
    }
    return ok;
}

/* A struct initializer: designated (.f = e, children MemberRef + value) or positional, matched
 * to the record's fields in order. */
typedef struct fieldlist {
    char *names[64];
    int n;
} fieldlist;

static enum CXVisitorResult collect_field(CXCursor c, CXClientData data)
{
    fieldlist *fl = data;
    if (fl->n < 64)
        fl->names[fl->n++] = str_take(clang_getCursorSpelling(c));
    return CXVisit_Continue;
}

typedef struct initctx {
    fnstate *fs;
    int depth;
    cJSON *out;        /* object (record) or array (array) */
    cJSON *index;      /* arrays: the index of each element of out */
    fieldlist *fields; /* NULL for arrays */
    long long next;    /* next positional field or element */
} initctx;

static enum CXChildVisitResult init_elem(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    initctx *ic = data;
    if (!clang_isExpression(clang_getCursorKind(c)))
        return CXChildVisit_Continue;
    CXCursor value = c;
    char *field = NULL;
    /* A designated element is an unexposed void expression: designators (.field or [index]),
     * then the value. */
    kids k;
    get_kids(c, &k);
    if (clang_getCursorKind(c) == CXCursor_UnexposedExpr && k.n >= 2 &&
        clang_getCursorType(c).kind == CXType_Void) {
        long long at;
        if (clang_getCursorKind(k.c[0]) == CXCursor_MemberRef)
            field = str_take(clang_getCursorSpelling(k.c[0]));
        else if (!ic->fields && const_index(k.c[0], &at))
            ic->next = at; /* [ENUM_B] = ... */
        value = k.c[k.n - 1];
    }
    cJSON *e = conv(ic->fs, value, ic->depth + 1);
    if (ic->fields) {
        if (field) {
            for (int i = 0; i < ic->fields->n; i++)
                if (strcmp(ic->fields->names[i], field) == 0)
                    ic->next = i;
        }
        if (ic->next < ic->fields->n && !cJSON_HasObjectItem(ic->out, ic->fields->names[ic->next]))
            cJSON_AddItemToObject(ic->out, ic->fields->names[ic->next], e);
        else
            cJSON_Delete(e);
        ic->next++;
    } else {
        cJSON_AddItemToArray(ic->out, e);
        cJSON_AddItemToArray(ic->index, cJSON_CreateNumber((double)ic->next++));
    }
    free(field);
    return CXChildVisit_Continue;
}

static cJSON *conv_init(fnstate *fs, CXCursor c, int depth)
{
    CXType t = clang_getCanonicalType(clang_getCursorType(c));
    initctx ic = {fs, depth, NULL, NULL, NULL, 0};
    cJSON *r;
    if (t.kind == CXType_Record) {
        fieldlist fl = {{0}, 0};
        clang_Type_visitFields(t, collect_field, &fl);
        ic.fields = &fl;
        ic.out = cJSON_CreateObject();
        clang_visitChildren(c, init_elem, &ic);
        for (int i = 0; i < fl.n; i++)
            free(fl.names[i]);
        r = mk("rec");
    } else if (t.kind == CXType_ConstantArray || t.kind == CXType_IncompleteArray) {
        ic.out = cJSON_CreateArray();
        ic.index = cJSON_CreateArray();
        clang_visitChildren(c, init_elem, &ic);
        r = mk("arr");
        cJSON_AddItemToArray(r, ic.out);
        cJSON_AddItemToArray(r, ic.index);
        return r;
    } else {
        /* a braced scalar: { k } */
        kids k;
        get_expr_kids(c, &k);
        return k.n ? conv(fs, k.c[0], depth + 1) : mk("0");
    }
    cJSON_AddItemToArray(r, ic.out);
    return r;
}

static cJSON *conv_call(fnstate *fs, CXCursor c, int depth)
{
    CXCursor ref = clang_getCursorReferenced(c);
    if (!clang_Cursor_isNull(ref)) {
        CXString n = clang_getCursorSpelling(ref);
        int is_api = strncmp(clang_getCString(n), "tk_", 3) == 0 || strncmp(clang_getCString(n), "tk__", 4) == 0;
        clang_disposeString(n);
        if (is_api)
            return mk("x");
        /* malloc, calloc...: memory that holds only what the program stores into it */
        if (clang_Location_isInSystemHeader(clang_getCursorLocation(ref)))
            return mk("0");
    }
    kids k;
    get_expr_kids(c, &k);
    if (k.n == 0)
        return unknown(fs, c, "unknown value: %s", "call without a callee");
    cJSON *r = mk("c");
    cJSON_AddItemToArray(r, conv(fs, k.c[0], depth + 1));
    cJSON *args = cJSON_CreateArray();
    int nargs = clang_Cursor_getNumArguments(c);
    for (int i = 0; i < nargs; i++)
        cJSON_AddItemToArray(args, conv(fs, clang_Cursor_getArgument(c, (unsigned)i), depth + 1));
    cJSON_AddItemToArray(r, args);
    unsigned col = 0, line = user_pos(fs ? fs->x->curf : NULL, c, &col);
    cJSON_AddItemToArray(r, cJSON_CreateNumber(line));
    cJSON_AddItemToArray(r, cJSON_CreateNumber(col));
    return r;
}

/* Converts an expression to an EXPR tree (internal.h). */
static cJSON *conv(fnstate *fs, CXCursor c, int depth)
{
    if (depth > MAX_EXPR_DEPTH)
        return unknown(fs, c, "unknown value: %s", "expression nested too deeply");
    enum CXCursorKind kind = clang_getCursorKind(c);
    kids k;
    switch (kind) {
    case CXCursor_DeclRefExpr:
        return conv_ref(fs, c);
    case CXCursor_IntegerLiteral:
    case CXCursor_GNUNullExpr:
    case CXCursor_CXXNullPtrLiteralExpr:
        return mk("0");
    case CXCursor_FloatingLiteral:
    case CXCursor_StringLiteral:
    case CXCursor_CharacterLiteral:
    case CXCursor_CXXBoolLiteralExpr:
        return mk("x");
    case CXCursor_MemberRefExpr: {
        get_expr_kids(c, &k);
        if (!k.n)
            return unknown(fs, c, "unknown value: member '%s' of an implicit object", "");
        cJSON *r = mk("m");
        cJSON_AddItemToArray(r, conv(fs, k.c[0], depth + 1));
        char *f = str_take(clang_getCursorSpelling(c));
        cJSON_AddItemToArray(r, cJSON_CreateString(f));
        free(f);
        return r;
    }
    case CXCursor_ArraySubscriptExpr: {
        get_expr_kids(c, &k);
        if (!k.n)
            return mk("x");
        cJSON *r = mk("i");
        cJSON_AddItemToArray(r, conv(fs, k.c[0], depth + 1));
        long long at;
        if (k.n == 2 && const_index(k.c[1], &at))
            cJSON_AddItemToArray(r, cJSON_CreateNumber((double)at)); /* TABLE[2], TABLE[OP_FWD] */
        return r;
    }
    case CXCursor_GenericSelectionExpr:
        /* _Generic: any of the associations (the first child is the controlling expression) */
    case CXCursor_ConditionalOperator: {
        get_expr_kids(c, &k);
        cJSON *r = mk("u"), *alts = cJSON_CreateArray();
        for (int i = 1; i < k.n; i++)
            cJSON_AddItemToArray(alts, conv(fs, k.c[i], depth + 1));
        cJSON_AddItemToArray(r, alts);
        return r;
    }
    case CXCursor_BinaryOperator:
    case CXCursor_CompoundAssignOperator: {
        enum CXBinaryOperatorKind op = clang_getCursorBinaryOperatorKind(c);
        get_expr_kids(c, &k);
        if ((op == CXBinaryOperator_Assign || op == CXBinaryOperator_Comma) && k.n == 2)
            return conv(fs, k.c[1], depth + 1);
        if ((op == CXBinaryOperator_Add || op == CXBinaryOperator_Sub) && k.n == 2 && kind == CXCursor_BinaryOperator) {
            /* TABLE + i is &TABLE[i]: an element, at a known index when i is constant */
            int left = clang_getCanonicalType(clang_getCursorType(k.c[0])).kind == CXType_Pointer;
            int right = clang_getCanonicalType(clang_getCursorType(k.c[1])).kind == CXType_Pointer;
            if (left != right) {
                cJSON *r = mk("i");
                cJSON_AddItemToArray(r, conv(fs, k.c[left ? 0 : 1], depth + 1));
                long long at;
                if (op == CXBinaryOperator_Add && const_index(k.c[left ? 1 : 0], &at))
                    cJSON_AddItemToArray(r, cJSON_CreateNumber((double)at));
                return r;
            }
        }
        return mk("x");
    }
    case CXCursor_UnaryOperator: {
        enum CXUnaryOperatorKind op = clang_getCursorUnaryOperatorKind(c);
        get_expr_kids(c, &k);
        if ((op == CXUnaryOperator_AddrOf || op == CXUnaryOperator_Deref) && k.n == 1)
            return conv(fs, k.c[0], depth + 1);
        return mk("x");
    }
    case CXCursor_CallExpr:
        return conv_call(fs, c, depth);
    case CXCursor_StmtExpr: {
        /* ({ ...; k; }): the value of the last statement */
        kids body, stmts;
        get_kids(c, &body);
        if (body.n == 1 && clang_getCursorKind(body.c[0]) == CXCursor_CompoundStmt) {
            get_kids(body.c[0], &stmts);
            if (stmts.n > 0 && stmts.n <= 16 && clang_isExpression(clang_getCursorKind(stmts.c[stmts.n - 1])))
                return conv(fs, stmts.c[stmts.n - 1], depth + 1);
        }
        return unknown(fs, c, "unknown value: %s", "a statement expression whose value the analyzer cannot find");
    }
    case CXCursor_InitListExpr:
        return conv_init(fs, c, depth);
    case CXCursor_UnexposedExpr:
    case CXCursor_ParenExpr:
    case CXCursor_CStyleCastExpr:
    case CXCursor_CompoundLiteralExpr:
    case CXCursor_CXXStaticCastExpr:
    case CXCursor_CXXReinterpretCastExpr:
    case CXCursor_CXXConstCastExpr:
    case CXCursor_CXXFunctionalCastExpr:
        get_expr_kids(c, &k);
        if (k.n == 1)
            return conv(fs, k.c[0], depth + 1);
        if (k.n == 4 && kind == CXCursor_UnexposedExpr) {
            /* GNU a ?: b, which libclang leaves unexposed: the common operand, the condition and
               the true value (both opaque references to it), the false value */
            cJSON *r = mk("u"), *alts = cJSON_CreateArray();
            cJSON_AddItemToArray(alts, conv(fs, k.c[0], depth + 1));
            cJSON_AddItemToArray(alts, conv(fs, k.c[3], depth + 1));
            cJSON_AddItemToArray(r, alts);
            return r;
        }
        if (k.n == 0 && kind == CXCursor_UnexposedExpr) {
            /* an implicit conversion of a declaration reference libclang does not expose */
            CXCursor ref = clang_getCursorReferenced(c);
            if (!clang_Cursor_isNull(ref) && clang_getCursorKind(ref) != CXCursor_NoDeclFound &&
                !clang_equalCursors(ref, c))
                return conv_ref(fs, c);
        }
        return mk("x");
    default: {
        CXString ks = clang_getCursorKindSpelling(kind);
        cJSON *r = unknown(fs, c, "unknown value: unsupported expression (%s)", clang_getCString(ks));
        clang_disposeString(ks);
        return r;
    }
    }
}

/* Strips parentheses and casts off an assignment's left-hand side. */
static CXCursor strip(CXCursor c)
{
    for (int guard = 0; guard < 64; guard++) {
        enum CXCursorKind k = clang_getCursorKind(c);
        if (k != CXCursor_ParenExpr && k != CXCursor_UnexposedExpr && k != CXCursor_CStyleCastExpr)
            break;
        kids ks;
        get_expr_kids(c, &ks);
        if (ks.n != 1)
            break;
        c = ks.c[0];
    }
    return c;
}

static void push_local(fnstate *fs, cJSON *id, cJSON *e)
{
    cJSON *list = cJSON_GetObjectItemCaseSensitive(fs->locals, id->valuestring);
    if (!list) {
        list = cJSON_CreateArray();
        cJSON_AddItemToObject(fs->locals, id->valuestring, list);
    }
    cJSON_AddItemToArray(list, e);
    cJSON_Delete(id);
}

static void add_global(extract *x, CXCursor decl, const cJSON *fn_usr, unsigned line, cJSON *e)
{
    cJSON *g = cJSON_CreateObject();
    add_str(g, "usr", clang_getCursorUSR(decl));
    note_internal(x, decl, cJSON_GetObjectItemCaseSensitive(g, "usr")->valuestring);
    add_str(g, "name", clang_getCursorSpelling(decl));
    cJSON_AddNumberToObject(g, "line", line);
    cJSON_AddItemToObject(g, "fn", fn_usr ? cJSON_CreateString(fn_usr->valuestring) : cJSON_CreateNull());
    cJSON_AddItemToObject(g, "e", e);
    cJSON_AddItemToArray(x->globals, g);
}

static cJSON *pos_obj(CXCursor c);

/* The address of a local kept where resolve.c does not follow stores made through it: in memory,
 * a file-scope variable or an aggregate initializer. Each is recorded in fs->escapes as
 * {line, v: the local's id, into: where it went}, so a read of the local says it may miss
 * values. Addresses passed to calls, or kept in local pointers, are followed instead. */
typedef struct escape_ctx {
    fnstate *fs;
    unsigned line;
    const char *into;
} escape_ctx;

static enum CXChildVisitResult find_escape(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    escape_ctx *ec = data;
    enum CXCursorKind kind = clang_getCursorKind(c);
    if (kind == CXCursor_CallExpr || kind == CXCursor_StmtExpr)
        return CXChildVisit_Continue;
    if (kind != CXCursor_UnaryOperator || clang_getCursorUnaryOperatorKind(c) != CXUnaryOperator_AddrOf)
        return CXChildVisit_Recurse;
    kids k;
    get_expr_kids(c, &k);
    CXCursor v = k.n == 1 ? strip(k.c[0]) : clang_getNullCursor();
    for (int guard = 0; guard < 32 && !clang_Cursor_isNull(v); guard++) { /* &o.f, &ks[1]: o, ks */
        enum CXCursorKind vk = clang_getCursorKind(v);
        if (vk != CXCursor_MemberRefExpr && vk != CXCursor_ArraySubscriptExpr)
            break;
        get_expr_kids(v, &k);
        v = k.n >= 1 ? strip(k.c[0]) : clang_getNullCursor();
    }
    if (!clang_Cursor_isNull(v) && clang_getCursorKind(v) == CXCursor_DeclRefExpr) {
        CXCursor ref = clang_getCursorReferenced(v);
        if (clang_getCursorKind(ref) == CXCursor_VarDecl && !is_global_var(ref)) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddNumberToObject(o, "line", ec->line);
            cJSON_AddItemToObject(o, "v", local_id(ref));
            cJSON_AddStringToObject(o, "into", ec->into);
            cJSON_AddItemToArray(ec->fs->escapes, o);
        }
    }
    return CXChildVisit_Continue;
}

static void note_escapes(fnstate *fs, CXCursor value, unsigned line, const char *into)
{
    escape_ctx ec = {fs, line, into};
    if (find_escape(value, value, &ec) == CXChildVisit_Recurse)
        clang_visitChildren(value, find_escape, &ec);
}

static void record_assign(fnstate *fs, CXCursor assign)
{
    kids k;
    get_expr_kids(assign, &k);
    if (k.n != 2)
        return;
    CXCursor lhs = strip(k.c[0]);
    if (!interesting_type(clang_getCursorType(lhs)))
        return;
    if (clang_getCursorKind(lhs) != CXCursor_DeclRefExpr) {
        /* a store through memory: *out = k, s->fwd = k, ks[1] = k; resolve.c finds the object
           the target denotes (its root variable and the fields and indices below it) */
        cJSON *st = pos_obj(assign);
        cJSON_AddItemToObject(st, "t", conv(fs, lhs, 0));
        cJSON_AddItemToObject(st, "e", conv(fs, k.c[1], 0));
        cJSON_AddItemToArray(fs->stores, st);
        note_escapes(fs, k.c[1], cursor_line(assign), "in memory");
        return;
    }
    CXCursor ref = clang_getCursorReferenced(lhs);
    enum CXCursorKind rk = clang_getCursorKind(ref);
    cJSON *e = conv(fs, k.c[1], 0);
    if (rk == CXCursor_ParmDecl) {
        char buf[16];
        snprintf(buf, sizeof(buf), "p%d", param_index(fs, ref));
        push_local(fs, cJSON_CreateString(buf), e);
    } else if (rk == CXCursor_VarDecl && is_global_var(ref)) {
        add_global(fs->x, ref, fs->usr, cursor_line(assign), e);
        note_escapes(fs, k.c[1], cursor_line(assign), "in a file-scope variable");
    } else if (rk == CXCursor_VarDecl) {
        push_local(fs, local_id(ref), e);
    } else {
        cJSON_Delete(e);
    }
}

/* line, col and ecol (one past the end, on the same line) of where the user wrote c. */
static void add_range(cJSON *o, CXCursor c, int spelling)
{
    unsigned line = 0, col = 0, eline = 0, ecol = 0;
    CXSourceRange r = clang_getCursorExtent(c);
    if (spelling) {
        clang_getSpellingLocation(clang_getRangeStart(r), NULL, &line, &col, NULL);
        clang_getSpellingLocation(clang_getRangeEnd(r), NULL, &eline, &ecol, NULL);
    } else {
        clang_getExpansionLocation(clang_getRangeStart(r), NULL, &line, &col, NULL);
        clang_getExpansionLocation(clang_getRangeEnd(r), NULL, &eline, &ecol, NULL);
    }
    if (eline != line || ecol <= col)
        ecol = col + 1;
    cJSON_AddNumberToObject(o, "line", line);
    cJSON_AddNumberToObject(o, "col", col);
    cJSON_AddNumberToObject(o, "ecol", ecol);
}

static CXFile spelling_file(CXCursor c)
{
    CXFile f = NULL;
    clang_getSpellingLocation(clang_getCursorLocation(c), &f, NULL, NULL, NULL);
    return f;
}

static cJSON *pos_obj(CXCursor c)
{
    cJSON *o = cJSON_CreateObject();
    add_range(o, c, 0);
    return o;
}

/* What a value is to a kernel launch: kind (tensor, ptr, int, uint, float, other) and size. */
static void classify(CXType t, const char **kind, long long *size)
{
    t = clang_getCanonicalType(t);
    *size = clang_Type_getSizeOf(t);
    switch (t.kind) {
    case CXType_Pointer: {
        CXType pointee = clang_getCanonicalType(clang_getPointeeType(t));
        CXString n = clang_getTypeSpelling(pointee);
        *kind = strstr(clang_getCString(n), "tk_tensor") ? "tensor" : "ptr";
        clang_disposeString(n);
        return;
    }
    case CXType_Bool: case CXType_Char_U: case CXType_UChar: case CXType_UShort: case CXType_UInt:
    case CXType_ULong: case CXType_ULongLong: case CXType_UInt128:
        *kind = "uint";
        return;
    case CXType_Char_S: case CXType_SChar: case CXType_Short: case CXType_Int: case CXType_Long:
    case CXType_LongLong: case CXType_Int128: case CXType_Enum:
        *kind = "int";
        return;
    case CXType_Float: case CXType_Double: case CXType_Half: case CXType_Float16: case CXType_LongDouble:
        *kind = "float";
        return;
    default:
        *kind = "other";
        return;
    }
}

/* Index of in[K] / out[K] when c is such an expression in an op body: which (1 in, 2 out) and K. */
static int io_index(fnstate *fs, CXCursor c, int *which, long long *k)
{
    CXCursor s = c;
    for (int guard = 0; guard < 16; guard++) {
        enum CXCursorKind kk = clang_getCursorKind(s);
        if (kk == CXCursor_ArraySubscriptExpr)
            break;
        if (kk != CXCursor_UnexposedExpr && kk != CXCursor_ParenExpr && kk != CXCursor_CStyleCastExpr)
            return 0;
        kids ks;
        get_expr_kids(s, &ks);
        if (ks.n != 1)
            return 0;
        s = ks.c[0];
    }
    if (clang_getCursorKind(s) != CXCursor_ArraySubscriptExpr)
        return 0;
    kids ks;
    get_expr_kids(s, &ks);
    if (ks.n != 2)
        return 0;
    CXCursor base = ks.c[0];
    while (clang_getCursorKind(base) == CXCursor_UnexposedExpr || clang_getCursorKind(base) == CXCursor_ParenExpr) {
        kids b;
        get_expr_kids(base, &b);
        if (b.n != 1)
            break;
        base = b.c[0];
    }
    if (clang_getCursorKind(base) != CXCursor_DeclRefExpr)
        return 0;
    int pi = param_index(fs, clang_getCursorReferenced(base));
    if (pi != 1 && pi != 2)
        return 0;
    *which = pi;
    *k = -1;
    CXEvalResult ev = clang_Cursor_Evaluate(ks.c[1]);
    if (ev) {
        if (clang_EvalResult_getKind(ev) == CXEval_Int)
            *k = clang_EvalResult_getAsLongLong(ev);
        clang_EvalResult_dispose(ev);
    }
    return 1;
}

/* The boxed arguments of a tk_wrap: the compound literal of TK_ARG(...) calls. Each records the
 * parameter type TK_ARG's _Generic chose (kind, size), where the user wrote it, and, in an op
 * body, which in[K]/out[K] it is. */
/* One kernel argument of a launch: its kind and size as boxed (type), where the user wrote it,
 * and for a pointer what it denotes (resolve.c follows it back to an op's in[K]). */
static void add_arg(fnstate *fs, cJSON *args, CXCursor user, CXType type)
{
    const char *kind = "other";
    long long size = 0;
    if (type.kind != CXType_Invalid)
        classify(type, &kind, &size);
    cJSON *a = cJSON_CreateObject();
    cJSON_AddStringToObject(a, "kind", kind);
    cJSON_AddNumberToObject(a, "size", (double)size);
    add_range(a, user, clang_File_isEqual(fs->x->curf, spelling_file(user)));
    if (!strcmp(kind, "tensor") || !strcmp(kind, "ptr"))
        cJSON_AddItemToObject(a, "e", conv(fs, user, 0));
    cJSON_AddItemToArray(args, a);
}

static enum CXChildVisitResult box_arg(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    void **ctx = data;
    fnstate *fs = ctx[0];
    cJSON *args = ctx[1];
    if (clang_getCursorKind(c) != CXCursor_CallExpr)
        return CXChildVisit_Recurse;
    kids k;
    get_expr_kids(c, &k);
    if (k.n < 2)
        return CXChildVisit_Continue;
    CXType ft = clang_getCanonicalType(clang_getCursorType(k.c[0]));
    if (ft.kind == CXType_Pointer)
        ft = clang_getCanonicalType(clang_getPointeeType(ft));
    /* the user's expression is the operand of the boxing call, its type that of the boxer's parameter */
    add_arg(fs, args, k.c[1], clang_getNumArgTypes(ft) == 1 ? clang_getArgType(ft, 0) : (CXType){CXType_Invalid, {0, 0}});
    return CXChildVisit_Continue;
}

static int is_raw_launch_api(const char *n)
{
    static const char *const names[] = {"cudaLaunchKernel", "cudaLaunchKernelEx", "cudaLaunchKernelExC",
                                        "cudaLaunchCooperativeKernel", "cuLaunchKernel",
                                        "cuLaunchKernelEx", "cuLaunchCooperativeKernel", NULL};
    for (int i = 0; names[i]; i++)
        if (strcmp(n, names[i]) == 0)
            return 1;
    return 0;
}

static void record_call(fnstate *fs, CXCursor c, CXCursor parent)
{
    CXCursor ref = clang_getCursorReferenced(c);
    /* a call in a template whose callee depends on its parameters references nothing yet: its
     * own spelling is the callee's name */
    char *name = str_take(clang_getCursorSpelling(clang_Cursor_isNull(ref) ? c : ref));
    int nargs = clang_Cursor_getNumArguments(c);
    /* tk_wrap and tk_wrap_shared: in C the boxed arguments are the array after nargs; in C++
     * (op.h's templates) they follow the fixed parameters */
    int shared = strcmp(name, "tk_wrap_launch_shared") == 0 || strcmp(name, "tk__wrap_shared") == 0;
    int cxx_wrap = strcmp(name, "tk__wrap") == 0 || strcmp(name, "tk__wrap_shared") == 0;
    if (((strcmp(name, "tk_wrap_launch") == 0 || strcmp(name, "tk_wrap_launch_shared") == 0) && nargs >= 2) ||
        (cxx_wrap && nargs >= 4 + shared)) {
        cJSON *l = pos_obj(c);
        if (shared)
            cJSON_AddTrueToObject(l, "shared");
        CXCursor karg = clang_Cursor_getArgument(c, 1);
        cJSON_AddItemToObject(l, "k", conv(fs, karg, 0));
        cJSON *kpos = cJSON_AddObjectToObject(l, "kpos"); /* where the kernel expression is written */
        CXCursor kuser = strip(karg); /* tk_wrap's (kernel): the parentheses are the macro's */
        add_range(kpos, kuser, clang_File_isEqual(fs->x->curf, spelling_file(kuser)));
        cJSON *args = cJSON_AddArrayToObject(l, "args");
        if (cxx_wrap) {
            for (int i = 4 + shared; i < nargs; i++)
                add_arg(fs, args, clang_Cursor_getArgument(c, (unsigned)i), clang_getCursorType(clang_Cursor_getArgument(c, (unsigned)i)));
        } else if (nargs >= 6 + shared) {
            void *ctx[2] = {fs, args};
            clang_visitChildren(clang_Cursor_getArgument(c, (unsigned)(5 + shared)), box_arg, ctx);
        }
        cJSON_AddItemToArray(fs->launches, l);
    } else if ((strcmp(name, "tk_call_op") == 0 || strcmp(name, "tk_call_op_at") == 0 ||
                strcmp(name, "tk_call_at") == 0 || strcmp(name, "tk_call_outs_at") == 0 ||
                strcmp(name, "tk__call") == 0 || strcmp(name, "tk__call_outs") == 0) && nargs >= 2) {
        cJSON *o = pos_obj(c);
        CXCursor a = strip(clang_Cursor_getArgument(c, 1));
        if (clang_getCursorKind(a) == CXCursor_StringLiteral) {
            char *lit = str_take(clang_getCursorSpelling(a));
            size_t n = strlen(lit);
            if (n >= 2 && lit[0] == '"' && lit[n - 1] == '"') {
                lit[n - 1] = '\0';
                cJSON_AddStringToObject(o, "name", lit + 1);
            } else {
                cJSON_AddNullToObject(o, "name");
            }
            free(lit);
        } else {
            cJSON_AddNullToObject(o, "name");
        }
        cJSON_AddItemToArray(fs->opcalls, o);
    } else if (strcmp(name, "__cudaPushCallConfiguration") == 0 || strcmp(name, "cudaConfigureCall") == 0) {
        /* the configuration call clang attaches to a <<<>>> launch; parent is the launch */
        cJSON *o = pos_obj(parent);
        cJSON_AddStringToObject(o, "kind", "<<<>>>");
        CXCursor k = clang_getCursorReferenced(parent);
        add_str(o, "kernel", clang_Cursor_isNull(k) ? clang_getCursorSpelling(parent) : clang_getCursorSpelling(k));
        cJSON_AddItemToArray(fs->raw, o);
    } else if (is_raw_launch_api(name)) {
        cJSON *o = pos_obj(c);
        cJSON_AddStringToObject(o, "kind", name);
        cJSON_AddStringToObject(o, "kernel", "");
        cJSON_AddItemToArray(fs->raw, o);
    } else if (strncmp(name, "tk_", 3) != 0 && strncmp(name, "__", 2) != 0 &&
               !(!clang_Cursor_isNull(ref) && clang_Location_isInSystemHeader(clang_getCursorLocation(ref)))) {
        kids k;
        get_expr_kids(c, &k);
        if (k.n) {
            cJSON *o = pos_obj(c);
            cJSON_AddItemToObject(o, "f", conv(fs, k.c[0], 0));
            cJSON *args = cJSON_CreateArray();
            for (int i = 0; i < nargs; i++) {
                CXCursor a = clang_Cursor_getArgument(c, (unsigned)i);
                cJSON_AddItemToArray(args, interesting_type(clang_getCursorType(a)) ? conv(fs, a, 0) : mk("x"));
            }
            cJSON_AddItemToObject(o, "a", args);
            cJSON_AddItemToArray(fs->calls, o);
        }
    }
    free(name);
}

static enum CXChildVisitResult body_visit(CXCursor c, CXCursor parent, CXClientData data)
{
    fnstate *fs = data;
    switch (clang_getCursorKind(c)) {
    case CXCursor_CallExpr:
        record_call(fs, c, parent);
        break;
    case CXCursor_VarDecl: {
        if (!interesting_type(clang_getCursorType(c)))
            break;
        CXCursor init = clang_Cursor_getVarDeclInitializer(c);
        if (clang_Cursor_isNull(init))
            break;
        push_local(fs, local_id(c), conv(fs, init, 0));
        if (clang_getCursorKind(strip(init)) == CXCursor_InitListExpr)
            note_escapes(fs, init, cursor_line(c), "in an initializer");
        break;
    }
    case CXCursor_BinaryOperator:
        if (clang_getCursorBinaryOperatorKind(c) == CXBinaryOperator_Assign)
            record_assign(fs, c);
        break;
    case CXCursor_ArraySubscriptExpr:
        if (fs->is_op) {
            int which;
            long long idx;
            if (io_index(fs, c, &which, &idx)) {
                if (idx < 0)
                    fs->dyn_index = 1;
                else if (which == 1 && idx > fs->in_max)
                    fs->in_max = (int)idx;
                else if (which == 2 && idx > fs->out_max)
                    fs->out_max = (int)idx;
            }
        }
        break;
    case CXCursor_ReturnStmt:
        if (fs->returns_interesting) {
            kids k;
            get_expr_kids(c, &k);
            if (k.n)
                cJSON_AddItemToArray(fs->rets, conv(fs, k.c[0], 0));
        }
        break;
    default:
        break;
    }
    return CXChildVisit_Recurse;
}

static enum CXChildVisitResult collect_param(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    fnstate *fs = data;
    if (clang_getCursorKind(c) == CXCursor_ParmDecl && fs->nparams < 64)
        fs->params[fs->nparams++] = c;
    return CXChildVisit_Continue;
}

/* --- which pointer parameters a kernel writes through (tk-undeclared-mutation) ------------ */

/* Parameters as bits: a kernel has at most 64 that matter. Local pointers that may point into
 * a parameter (float *p = x + off; T *q = (T *)x; p = cond ? x : y) are aliases of it. */
typedef struct kwrites {
    fnstate *fs;
    CXCursor alias[64];
    unsigned long long alias_mask[64];
    int nalias;
    int changed;             /* an alias grew during this pass */
    unsigned long long written;
} kwrites;

static unsigned long long *alias_of(kwrites *w, CXCursor decl, int add)
{
    for (int i = 0; i < w->nalias; i++)
        if (clang_equalCursors(w->alias[i], decl))
            return &w->alias_mask[i];
    if (!add || w->nalias == 64)
        return NULL;
    w->alias[w->nalias] = decl;
    w->alias_mask[w->nalias] = 0;
    return &w->alias_mask[w->nalias++];
}

static int is_pointer(CXCursor e) { return clang_getCanonicalType(clang_getCursorType(e)).kind == CXType_Pointer; }

static unsigned long long memory_of(kwrites *w, CXCursor lv, int depth);

/* The parameters a pointer-valued expression may point into. */
static unsigned long long points_into(kwrites *w, CXCursor e, int depth)
{
    if (depth > 32)
        return 0;
    kids ks;
    get_expr_kids(e, &ks);
    switch (clang_getCursorKind(e)) {
    case CXCursor_DeclRefExpr: {
        CXCursor ref = clang_getCursorReferenced(e);
        int pi = param_index(w->fs, ref);
        if (pi >= 0)
            return pi < 64 ? 1ull << pi : 0;
        unsigned long long *m = alias_of(w, ref, 0);
        return m ? *m : 0;
    }
    case CXCursor_BinaryOperator: {
        enum CXBinaryOperatorKind op = clang_getCursorBinaryOperatorKind(e);
        if (ks.n != 2)
            return 0;
        if (op == CXBinaryOperator_Assign || op == CXBinaryOperator_Comma)
            return points_into(w, ks.c[1], depth + 1);
        if (op == CXBinaryOperator_Add || op == CXBinaryOperator_Sub) /* p + off: the pointer operand */
            return (is_pointer(ks.c[0]) ? points_into(w, ks.c[0], depth + 1) : 0) |
                   (is_pointer(ks.c[1]) ? points_into(w, ks.c[1], depth + 1) : 0);
        return 0;
    }
    case CXCursor_ConditionalOperator:
        return ks.n == 3 ? points_into(w, ks.c[1], depth + 1) | points_into(w, ks.c[2], depth + 1) : 0;
    case CXCursor_UnaryOperator:
        if (clang_getCursorUnaryOperatorKind(e) == CXUnaryOperator_AddrOf && ks.n == 1)
            return memory_of(w, ks.c[0], depth + 1); /* &x[i], &s->f */
        return 0;
    case CXCursor_ArraySubscriptExpr:
    case CXCursor_MemberRefExpr:
    case CXCursor_CallExpr:
        return 0; /* a pointer loaded from memory or returned: not followed */
    default:
        /* parentheses, casts ((T *)x + off), implicit conversions */
        return ks.n == 1 ? points_into(w, ks.c[0], depth + 1) : 0;
    }
}

/* The parameters whose memory an lvalue lies in: p[i], *p, *(p + i), p->f, p[i].f. */
static unsigned long long memory_of(kwrites *w, CXCursor lv, int depth)
{
    if (depth > 32)
        return 0;
    kids ks;
    get_expr_kids(lv, &ks);
    switch (clang_getCursorKind(lv)) {
    case CXCursor_ArraySubscriptExpr:
        return ks.n == 2 ? points_into(w, ks.c[is_pointer(ks.c[0]) ? 0 : 1], depth + 1) : 0;
    case CXCursor_MemberRefExpr:
        if (ks.n != 1)
            return 0;
        return is_pointer(ks.c[0]) ? points_into(w, ks.c[0], depth + 1) : memory_of(w, ks.c[0], depth + 1);
    case CXCursor_UnaryOperator:
        if (clang_getCursorUnaryOperatorKind(lv) == CXUnaryOperator_Deref && ks.n == 1)
            return points_into(w, ks.c[0], depth + 1);
        return 0;
    case CXCursor_ParenExpr:
    case CXCursor_UnexposedExpr:
    case CXCursor_CStyleCastExpr:
        return ks.n == 1 ? memory_of(w, ks.c[0], depth + 1) : 0;
    default:
        return 0; /* a variable itself, not memory behind a pointer */
    }
}

/* Pass 1: local pointers and what they may point into (run until nothing grows). */
static enum CXChildVisitResult kernel_aliases(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    kwrites *w = data;
    CXCursor var = clang_getNullCursor(), value = clang_getNullCursor();
    kids ks;
    if (clang_getCursorKind(c) == CXCursor_VarDecl && is_pointer(c)) {
        var = c;
        value = clang_Cursor_getVarDeclInitializer(c);
    } else if (clang_getCursorKind(c) == CXCursor_BinaryOperator &&
               clang_getCursorBinaryOperatorKind(c) == CXBinaryOperator_Assign) {
        get_expr_kids(c, &ks);
        CXCursor lhs = ks.n == 2 ? strip(ks.c[0]) : clang_getNullCursor();
        if (!clang_Cursor_isNull(lhs) && clang_getCursorKind(lhs) == CXCursor_DeclRefExpr && is_pointer(lhs) &&
            clang_getCursorKind(clang_getCursorReferenced(lhs)) == CXCursor_VarDecl) {
            var = clang_getCursorReferenced(lhs);
            value = ks.c[1];
        }
    }
    if (!clang_Cursor_isNull(var) && !clang_Cursor_isNull(value)) {
        unsigned long long m = points_into(w, value, 0);
        unsigned long long *slot = m ? alias_of(w, var, 1) : NULL;
        if (slot && (*slot | m) != *slot) {
            *slot |= m;
            w->changed = 1;
        }
    }
    return CXChildVisit_Recurse;
}

static int is_atomic_api(const char *n)
{
    /* CUDA's atomicAdd, atomicExch_block...; the GCC/clang builtins */
    return !strncmp(n, "atomic", 6) || !strncmp(n, "__atomic_", 9) || !strncmp(n, "__sync_", 7) ||
           !strncmp(n, "__nv_atomic", 11);
}

/* Pass 2: the writes. */
static enum CXChildVisitResult kernel_writes(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    kwrites *w = data;
    enum CXCursorKind k = clang_getCursorKind(c);
    CXCursor target = clang_getNullCursor();
    kids ks;
    if (k == CXCursor_BinaryOperator && clang_getCursorBinaryOperatorKind(c) == CXBinaryOperator_Assign) {
        get_expr_kids(c, &ks);
        if (ks.n == 2)
            target = ks.c[0];
    } else if (k == CXCursor_CompoundAssignOperator) {
        get_expr_kids(c, &ks);
        if (ks.n == 2)
            target = ks.c[0];
    } else if (k == CXCursor_CallExpr) {
        /* C++ element types (__nv_bfloat16, __half, structs) assign through operator=,
           operator+=, operator++: the call's first operand after the operator itself is what is
           written. An atomic writes where its first argument points. */
        CXString sp = clang_getCursorSpelling(c);
        const char *name = clang_getCString(sp);
        int assigns = name && !strncmp(name, "operator", 8) &&
                      (!strcmp(name + 8, "=") || !strcmp(name + 8, "+=") || !strcmp(name + 8, "-=") ||
                       !strcmp(name + 8, "*=") || !strcmp(name + 8, "/=") || !strcmp(name + 8, "++") ||
                       !strcmp(name + 8, "--"));
        int atomic = name && is_atomic_api(name);
        clang_disposeString(sp);
        if (atomic && clang_Cursor_getNumArguments(c) >= 1)
            w->written |= points_into(w, clang_Cursor_getArgument(c, 0), 0);
        if (assigns) {
            get_expr_kids(c, &ks);
            for (int i = 0; i < ks.n && clang_Cursor_isNull(target); i++) {
                CXString ksp = clang_getCursorSpelling(ks.c[i]);
                const char *kn = clang_getCString(ksp);
                if (!(kn && !strncmp(kn, "operator", 8)))
                    target = ks.c[i];
                clang_disposeString(ksp);
            }
        }
    } else if (k == CXCursor_UnaryOperator) {
        enum CXUnaryOperatorKind op = clang_getCursorUnaryOperatorKind(c);
        if (op == CXUnaryOperator_PostInc || op == CXUnaryOperator_PostDec || op == CXUnaryOperator_PreInc ||
            op == CXUnaryOperator_PreDec) {
            get_expr_kids(c, &ks);
            if (ks.n == 1)
                target = ks.c[0];
        }
    }
    if (!clang_Cursor_isNull(target))
        w->written |= memory_of(w, target, 0);
    return CXChildVisit_Recurse;
}

static void summarize_kernel(extract *x, CXCursor fn)
{
    cJSON *k = cJSON_CreateObject();
    add_str(k, "name", clang_getCursorSpelling(fn));
    cJSON_AddNumberToObject(k, "line", cursor_line(fn));
    cJSON *params = cJSON_AddArrayToObject(k, "params");
    int n = clang_Cursor_getNumArguments(fn);
    for (int i = 0; i < n; i++) {
        CXCursor p = clang_Cursor_getArgument(fn, (unsigned)i);
        cJSON *po = cJSON_CreateObject();
        add_str(po, "name", clang_getCursorSpelling(p));
        add_str(po, "type", clang_getTypeSpelling(clang_getCursorType(p)));
        const char *kind;
        long long size;
        classify(clang_getCursorType(p), &kind, &size);
        cJSON_AddStringToObject(po, "kind", kind);
        cJSON_AddNumberToObject(po, "size", (double)size);
        cJSON_AddItemToArray(params, po);
    }
    /* which pointer parameters the body writes through (tk-undeclared-mutation) */
    fnstate fs;
    memset(&fs, 0, sizeof(fs));
    clang_visitChildren(fn, collect_param, &fs);
    kwrites kw;
    memset(&kw, 0, sizeof(kw));
    kw.fs = &fs;
    for (int pass = 0; pass < 8; pass++) { /* aliases of aliases: until nothing grows */
        kw.changed = 0;
        clang_visitChildren(fn, kernel_aliases, &kw);
        if (!kw.changed)
            break;
    }
    clang_visitChildren(fn, kernel_writes, &kw);
    cJSON *w = cJSON_AddArrayToObject(k, "writes");
    for (int i = 0; i < fs.nparams && i < 64; i++)
        if (kw.written >> i & 1)
            cJSON_AddItemToArray(w, cJSON_CreateNumber(i));
    cJSON_AddItemToArray(x->kernels, k);
}

static void summarize_function(extract *x, CXCursor fn)
{
    char *kernel = annotation(fn, "tk.kernel");
    if (kernel) {
        free(kernel);
        summarize_kernel(x, fn);
        return;
    }
    fnstate fs;
    memset(&fs, 0, sizeof(fs));
    fs.x = x;
    cJSON *f = cJSON_CreateObject();
    char *usr = str_take(clang_getCursorUSR(fn));
    cJSON_AddStringToObject(f, "usr", usr);
    free(usr);
    fs.usr = cJSON_GetObjectItemCaseSensitive(f, "usr");
    note_internal(x, fn, fs.usr->valuestring);
    add_str(f, "name", clang_getCursorSpelling(fn));
    unsigned fcol = 0;
    cursor_pos(fn, NULL, NULL, &fcol);
    cJSON_AddNumberToObject(f, "line", cursor_line(fn));
    cJSON_AddNumberToObject(f, "col", fcol);
    cJSON_AddBoolToObject(f, "static", clang_Cursor_getStorageClass(fn) == CX_SC_Static);
    char *op = annotation(fn, "tk.op:");
    fs.is_op = op != NULL;
    fs.in_max = fs.out_max = -1;
    if (op) {
        char *schema = annotation(fn, "tk.schema:");
        cJSON_AddStringToObject(f, "op", op);
        cJSON_AddStringToObject(f, "schema", schema ? schema : "");
        free(op);
        free(schema);
    }
    clang_visitChildren(fn, collect_param, &fs);
    cJSON *pn = cJSON_AddArrayToObject(f, "params");
    for (int i = 0; i < fs.nparams; i++) {
        char *pname = str_take(clang_getCursorSpelling(fs.params[i]));
        cJSON_AddItemToArray(pn, cJSON_CreateString(pname));
        free(pname);
    }
    fs.returns_interesting = interesting_type(clang_getResultType(clang_getCursorType(fn)));
    fs.launches = cJSON_AddArrayToObject(f, "launches");
    fs.calls = cJSON_AddArrayToObject(f, "calls");
    fs.opcalls = cJSON_AddArrayToObject(f, "opcalls");
    fs.rets = cJSON_AddArrayToObject(f, "rets");
    fs.locals = cJSON_AddObjectToObject(f, "locals");
    fs.raw = cJSON_AddArrayToObject(f, "raw");
    fs.stores = cJSON_AddArrayToObject(f, "stores");
    fs.escapes = cJSON_AddArrayToObject(f, "escapes");
    clang_visitChildren(fn, body_visit, &fs);
    if (fs.is_op) {
        cJSON_AddNumberToObject(f, "in_max", fs.in_max);
        cJSON_AddNumberToObject(f, "out_max", fs.out_max);
        cJSON_AddBoolToObject(f, "dyn_index", fs.dyn_index);
    }
    cJSON_AddItemToArray(x->funcs, f);
}

/* --- TK_AUTOTUNE declarations (checked by lint: resolve.c) --------------------------------- */

/* The first cursor of `kind` at or below c (implicit casts and parentheses are looked through). */
typedef struct kind_search {
    enum CXCursorKind kind;
    CXCursor found;
    int ok;
} kind_search;

static enum CXChildVisitResult find_kind(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    kind_search *s = data;
    if (clang_getCursorKind(c) != s->kind)
        return CXChildVisit_Recurse;
    s->found = c;
    s->ok = 1;
    return CXChildVisit_Break;
}

static int below(CXCursor c, enum CXCursorKind kind, CXCursor *out)
{
    kind_search s = {kind, c, clang_getCursorKind(c) == kind};
    if (!s.ok)
        clang_visitChildren(c, find_kind, &s);
    *out = s.found;
    return s.ok;
}

/* Where a macro argument was written: its spelling location when that is in the main file
 * (TK_AUTOTUNE(k, "n", ...) puts "n" on its own column), else the macro use. */
static void arg_pos(extract *x, CXCursor c, unsigned *line, unsigned *col)
{
    CXFile f;
    clang_getSpellingLocation(clang_getCursorLocation(c), &f, line, col, NULL);
    if (!f || !clang_File_isEqual(f, x->curf))
        cursor_pos(c, NULL, line, col);
}

/* The string an expression evaluates to, when it is a string literal (decayed to a pointer:
 * libclang evaluates the conversion, not the bare literal), malloc'd into *(char **)data. */
static enum CXChildVisitResult find_string(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    char **out = data;
    CXEvalResult ev = clang_Cursor_Evaluate(c);
    if (ev && clang_EvalResult_getKind(ev) == CXEval_StrLiteral) {
        const char *s = clang_EvalResult_getAsStr(ev);
        *out = strdup(s ? s : "");
    }
    if (ev)
        clang_EvalResult_dispose(ev);
    return *out ? CXChildVisit_Break : CXChildVisit_Recurse;
}

/* A string literal's value, the bytes the compiler makes of it (escapes decoded, adjacent
 * literals joined; up to a first NUL, where every C reader of the string stops), malloc'd, or
 * NULL. Not the literal's spelling: libclang re-escapes it ("\t" for a tab), which is not the
 * string the runtime reads. */
static char *string_value(CXCursor c)
{
    char *v = NULL;
    if (find_string(c, clang_getNullCursor(), &v) == CXChildVisit_Recurse)
        clang_visitChildren(c, find_string, &v);
    return v;
}

typedef struct string_list {
    extract *x;
    cJSON *items;
} string_list;

/* {"s": value, "line": l, "col": c} for each string initializer. */
static enum CXChildVisitResult collect_string(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    string_list *l = data;
    char *v = string_value(c);
    unsigned line = 0, col = 0;
    arg_pos(l->x, c, &line, &col);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "s", v ? v : "");
    cJSON_AddNumberToObject(o, "line", line);
    cJSON_AddNumberToObject(o, "col", col);
    cJSON_AddItemToArray(l->items, o);
    free(v);
    return CXChildVisit_Continue;
}

/* TK_AUTOTUNE's record: {version, kernel, key, params, count, configs, file, line}; the configurations
 * are the string initializers of the array `configs` names. */
static void summarize_tune(extract *x, CXCursor var)
{
    CXCursor init;
    kids k;
    if (!below(var, CXCursor_InitListExpr, &init))
        return;
    get_kids(init, &k);
    if (k.n < 6)
        return;
    cJSON *t = cJSON_CreateObject();
    CXCursor ref;
    char *kernel = below(k.c[1], CXCursor_DeclRefExpr, &ref) ? str_take(clang_getCursorSpelling(ref)) : NULL;
    char *key = string_value(k.c[2]), *params = string_value(k.c[3]);
    cJSON_AddStringToObject(t, "kernel", kernel ? kernel : "");
    cJSON_AddStringToObject(t, "key", key ? key : "");
    cJSON_AddStringToObject(t, "params", params ? params : "");
    unsigned kl = 0, kc = 0, pl = 0, pc = 0;
    arg_pos(x, k.c[2], &kl, &kc);
    arg_pos(x, k.c[3], &pl, &pc);
    cJSON_AddNumberToObject(t, "key_line", kl);
    cJSON_AddNumberToObject(t, "key_col", kc);
    cJSON_AddNumberToObject(t, "params_line", pl);
    cJSON_AddNumberToObject(t, "params_col", pc);
    free(kernel);
    free(key);
    free(params);
    unsigned col = 0;
    cursor_pos(var, NULL, NULL, &col);
    cJSON_AddNumberToObject(t, "line", cursor_line(var));
    cJSON_AddNumberToObject(t, "col", col);
    cJSON *configs = cJSON_AddArrayToObject(t, "configs");
    CXCursor list;
    if (below(k.c[5], CXCursor_DeclRefExpr, &ref) &&
        below(clang_getCursorReferenced(ref), CXCursor_InitListExpr, &list))
        clang_visitChildren(list, collect_string, &(string_list){x, configs});
    cJSON_AddItemToArray(x->tunes, t);
}

/* A TK_HEURISTIC declaration: {version, kernel, "PARAM", "values", file, line}, recorded with the
 * autotune declarations ("heuristic":true). */
static void summarize_heuristic(extract *x, CXCursor var)
{
    CXCursor init, ref;
    kids k;
    if (!below(var, CXCursor_InitListExpr, &init))
        return;
    get_kids(init, &k);
    if (k.n < 4)
        return;
    char *kernel = below(k.c[1], CXCursor_DeclRefExpr, &ref) ? str_take(clang_getCursorSpelling(ref)) : NULL;
    char *param = string_value(k.c[2]), *values = string_value(k.c[3]);
    cJSON *t = cJSON_CreateObject();
    cJSON_AddBoolToObject(t, "heuristic", 1);
    cJSON_AddStringToObject(t, "kernel", kernel ? kernel : "");
    cJSON_AddStringToObject(t, "param", param ? param : "");
    cJSON_AddStringToObject(t, "values", values ? values : "");
    unsigned col = 0;
    cursor_pos(var, NULL, NULL, &col);
    cJSON_AddNumberToObject(t, "line", cursor_line(var));
    cJSON_AddNumberToObject(t, "col", col);
    free(kernel);
    free(param);
    free(values);
    cJSON_AddItemToArray(x->tunes, t);
}

/* The identifiers a file's code uses, outside comments and preprocessor lines, read from the
 * buffer clang parsed (an editor's unsaved one under the LSP): a TK_AUTOTUNE parameter reaches
 * its kernel as -DNAME=value, and its #ifndef/#define default is not a use (resolve.c). */
static void collect_idents(extract *x, CXFile file, cJSON *out)
{
    size_t len = 0;
    const char *text = clang_getFileContents(x->tu, file, &len);
    tk_map seen = TK_MAP_INIT;
    int line_start = 1, directive = 0;
    for (size_t i = 0; text && i < len; i++) {
        char ch = text[i];
        if (ch == '\n') {
            line_start = 1;
            directive = directive && i > 0 && text[i - 1] == '\\';
            continue;
        }
        if (ch == '/' && i + 1 < len && text[i + 1] == '/') { /* comments use nothing */
            while (i + 1 < len && text[i + 1] != '\n')
                i++;
            continue;
        }
        if (ch == '/' && i + 1 < len && text[i + 1] == '*') {
            size_t stop = i + 2;
            while (stop + 1 < len && !(text[stop] == '*' && text[stop + 1] == '/'))
                stop++;
            for (stop = stop + 1 < len ? stop + 1 : len; i < stop; i++)
                if (text[i] == '\n')
                    line_start = 1;
            continue;
        }
        if (line_start && ch == '#')
            directive = 1;
        if (ch != ' ' && ch != '\t')
            line_start = 0;
        if (!(isalpha((unsigned char)ch) || ch == '_') || (i > 0 && (isalnum((unsigned char)text[i - 1]) || text[i - 1] == '_')))
            continue;
        size_t n = 1;
        while (i + n < len && (isalnum((unsigned char)text[i + n]) || text[i + n] == '_'))
            n++;
        if (!directive && n < 128) {
            char word[128];
            memcpy(word, text + i, n);
            word[n] = '\0';
            if (!tk_map_get(&seen, word)) {
                cJSON *w = cJSON_CreateString(word);
                cJSON_AddItemToArray(out, w);
                if (tk_map_put(&seen, w->valuestring, w))
                    break; /* out of memory: a shorter list only weakens one lint check */
            }
        }
        i += n - 1;
    }
    tk_map_release(&seen);
}

static enum CXChildVisitResult top_visit(CXCursor c, CXCursor parent, CXClientData data)
{
    (void)parent;
    extract *x = data;
    enum CXCursorKind kind = clang_getCursorKind(c);
    if (kind == CXCursor_Namespace || kind == CXCursor_LinkageSpec || kind == CXCursor_UnexposedDecl)
        return CXChildVisit_Recurse;
    if (!enter_file(x, c))
        return CXChildVisit_Continue;
    if ((kind == CXCursor_FunctionDecl || kind == CXCursor_CXXMethod || kind == CXCursor_FunctionTemplate) &&
        clang_isCursorDefinition(c)) {
        summarize_function(x, c);
    } else if (kind == CXCursor_VarDecl) {
        char *h = annotation(c, "tk.kernel_decl");
        char *tune = h ? NULL : annotation(c, "tk.autotune");
        char *heur = h || tune ? NULL : annotation(c, "tk.heuristic");
        if (tune) {
            summarize_tune(x, c);
            free(tune);
        } else if (heur) {
            summarize_heuristic(x, c);
            free(heur);
        } else if (h) {
            cJSON *o = cJSON_CreateObject();
            add_str(o, "name", clang_getCursorSpelling(c));
            cJSON_AddNumberToObject(o, "line", cursor_line(c));
            cJSON_AddItemToArray(x->handles, o);
            free(h);
        } else if (interesting_type(clang_getCursorType(c))) {
            kids k;
            get_expr_kids(c, &k);
            if (k.n)
                add_global(x, c, NULL, cursor_line(c), conv(NULL, k.c[k.n - 1], 0));
        }
    } else if (kind == CXCursor_ClassDecl || kind == CXCursor_StructDecl) {
        return CXChildVisit_Recurse; /* methods defined inline */
    }
    return CXChildVisit_Continue;
}

/* The first error clang reported, as a tk-parse-error diagnostic. */
static void first_error(CXTranslationUnit tu, cJSON *diags, const char *main_path)
{
    unsigned n = clang_getNumDiagnostics(tu);
    for (unsigned i = 0; i < n; i++) {
        CXDiagnostic d = clang_getDiagnostic(tu, i);
        enum CXDiagnosticSeverity sev = clang_getDiagnosticSeverity(d);
        CXString opt = clang_getDiagnosticOption(d, NULL);
        /* libclang reports unknown-cuda-version even when told not to */
        int skip = sev < CXDiagnostic_Error || strstr(clang_getCString(opt), "unknown-cuda-version");
        clang_disposeString(opt);
        if (!skip) {
            CXFile f;
            unsigned line, col;
            clang_getExpansionLocation(clang_getDiagnosticLocation(d), &f, &line, &col, NULL);
            cJSON *o = cJSON_CreateObject();
            if (!f) { /* no place in a file (an encoding clang refuses): the file itself, at its start */
                line = col = 1;
                cJSON_AddStringToObject(o, "file", main_path);
            } else {
                char *real = str_take(clang_File_tryGetRealPathName(f));
                if (!*real) {
                    free(real);
                    real = str_take(clang_getFileName(f));
                }
                cJSON_AddStringToObject(o, "file", real);
                if (strcmp(real, main_path) != 0) /* in a header: reported once, naming this includer */
                    cJSON_AddStringToObject(o, "via", main_path);
                free(real);
            }
            cJSON_AddNumberToObject(o, "line", line);
            cJSON_AddNumberToObject(o, "col", col);
            cJSON_AddStringToObject(o, "severity", "error");
            cJSON_AddStringToObject(o, "rule", "tk-parse-error");
            char *msg = str_take(clang_getDiagnosticSpelling(d));
            if (strstr(msg, "UTF-16") && strstr(msg, "byte order mark"))
                cJSON_AddStringToObject(o, "message", "the file is UTF-16 (it starts with a UTF-16 byte order mark): "
                                                      "expected UTF-8, without a byte order mark or with the UTF-8 one");
            else
                cJSON_AddStringToObject(o, "message", msg);
            free(msg);
            cJSON_AddItemToArray(diags, o);
            clang_disposeDiagnostic(d);
            return;
        }
        clang_disposeDiagnostic(d);
    }
}

static void collect_include(CXFile included, CXSourceLocation *stack, unsigned depth, CXClientData data)
{
    cJSON *deps = data;
    if (depth == 0)
        return; /* the main file */
    /* a header is a dependency unless it was found on a system include path */
    if (clang_Location_isInSystemHeader(stack[0]))
        return;
    (void)stack;
    char *real = str_take(clang_File_tryGetRealPathName(included));
    if (!*real) {
        free(real);
        real = str_take(clang_getFileName(included));
    }
    for (cJSON *it = deps->child; it; it = it->next)
        if (strcmp(it->valuestring, real) == 0) {
            free(real);
            return;
        }
    cJSON_AddItemToArray(deps, cJSON_CreateString(real));
    free(real);
}

/* The first 16 hex digits of the digest of a header's summary: its configuration. */
static void config_of(const cJSON *sum, char out[17])
{
    char *text = cJSON_PrintUnformatted(sum);
    char hex[65] = "";
    if (text)
        tk_sha256_hex(text, strlen(text), hex);
    free(text);
    memcpy(out, hex, 16);
    out[16] = '\0';
}

/* Gives each internal definition in a header the configuration of its header, everywhere the
 * summary names it. */
static void qualify_internal(extract *x, cJSON *item, char (*configs)[17])
{
    for (cJSON *c = item ? item->child : NULL; c; c = c->next) {
        if (cJSON_IsString(c)) {
            const cJSON *pair = tk_map_get(&x->internal_unit, c->valuestring);
            if (pair) {
                char *q = NULL;
                size_t n = strlen(c->valuestring) + 18;
                if ((q = malloc(n))) {
                    snprintf(q, n, "%s#%s", c->valuestring, configs[cJSON_GetArrayItem(pair, 1)->valueint]);
                    cJSON_SetValuestring(c, q);
                    free(q);
                }
            }
        } else if (cJSON_IsArray(c) || cJSON_IsObject(c)) {
            qualify_internal(x, c, configs);
        }
    }
}

static int defines_something(const cJSON *sum)
{
    static const char *const lists[] = {"funcs", "globals", "kernels", "handles", "tunes"};
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
        if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(sum, lists[i])))
            return 1;
    return 0;
}

/* The headers' summaries, in s's "headers": each with its configuration, its internal
 * definitions named apart per configuration. */
static int finish_headers(extract *x, cJSON *s)
{
    char (*configs)[17] = calloc(x->nunits + 1, sizeof(*configs));
    if (!configs)
        return TK_ENOMEM;
    for (size_t i = 1; i < x->nunits; i++)
        if (x->units[i].sum)
            config_of(x->units[i].sum, configs[i]);
    if (cJSON_GetArraySize(x->internal))
        for (size_t i = 0; i < x->nunits; i++)
            qualify_internal(x, x->units[i].sum, configs);
    cJSON *headers = cJSON_AddArrayToObject(s, "headers");
    for (size_t i = 1; i < x->nunits; i++) {
        cJSON *sum = x->units[i].sum;
        x->units[i].sum = NULL;
        if (!sum || !defines_something(sum)) {
            cJSON_Delete(sum);
            continue;
        }
        cJSON_AddStringToObject(sum, "config", configs[i]);
        cJSON_AddItemToArray(headers, sum);
    }
    free(configs);
    return 0;
}

int tk_frontend_summarize(cJSON **summary, cJSON **deps, CXIndex idx, const tk_tu *tu,
                          struct CXUnsavedFile *unsaved, unsigned n_unsaved)
{
    cJSON *s = new_summary(tu->path);
    cJSON *d = cJSON_CreateArray();
    extract x = {0};
    x.internal = cJSON_CreateArray();
    if (!s || !d || !x.internal) {
        cJSON_Delete(s);
        cJSON_Delete(d);
        cJSON_Delete(x.internal);
        return tk_error_set(TK_ENOMEM, "out of memory");
    }
    cJSON *diags = cJSON_GetObjectItemCaseSensitive(s, "diags");
    x.own_include = tu->own_include;
    int rc = 0;

    unsigned flags = CXTranslationUnit_KeepGoing | CXTranslationUnit_IgnoreNonErrorsFromIncludedFiles;
    enum CXErrorCode err = clang_parseTranslationUnit2(idx, tu->path, (const char *const *)tu->args,
                                                       tu->nargs, unsaved, n_unsaved, flags, &x.tu);
    if (err != CXError_Success || !x.tu) {
        static const char *const why[] = {"success", "failure", "crashed", "invalid arguments",
                                          "AST read error"};
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "file", tu->path);
        cJSON_AddNumberToObject(o, "line", 1);
        cJSON_AddNumberToObject(o, "col", 1);
        cJSON_AddStringToObject(o, "severity", "error");
        cJSON_AddStringToObject(o, "rule", "tk-parse-error");
        char msg[128];
        snprintf(msg, sizeof(msg), "libclang could not parse the file (%s)",
                 (unsigned)err < 5 ? why[err] : "unknown error");
        cJSON_AddStringToObject(o, "message", msg);
        cJSON_AddItemToArray(diags, o);
    } else {
        x.mainf = clang_getFile(x.tu, tu->path);
        if (add_unit(&x, x.mainf, s, 0) < 0) {
            rc = tk_error_set(TK_ENOMEM, "out of memory");
        } else {
            select_unit(&x, &x.units[0]);
            first_error(x.tu, diags, tu->path);
            clang_visitChildren(clang_getTranslationUnitCursor(x.tu), top_visit, &x);
            for (size_t i = 0; i < x.nunits; i++)
                if (x.units[i].sum && cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(x.units[i].sum, "kernels")))
                    collect_idents(&x, x.units[i].file, cJSON_AddArrayToObject(x.units[i].sum, "idents"));
            clang_getInclusions(x.tu, collect_include, d);
            cJSON_AddItemToObject(s, "includes", cJSON_Duplicate(d, 1));
            if (finish_headers(&x, s))
                rc = tk_error_set(TK_ENOMEM, "out of memory");
        }
        clang_disposeTranslationUnit(x.tu);
    }
    for (size_t i = 1; i < x.nunits; i++)
        cJSON_Delete(x.units[i].sum);
    free(x.units);
    tk_map_release(&x.internal_unit);
    cJSON_Delete(x.internal);
    if (rc) {
        cJSON_Delete(s);
        cJSON_Delete(d);
        return rc;
    }
    *summary = s;
    *deps = d;
    return 0;
}
