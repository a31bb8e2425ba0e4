/* tkexport inspect's renderings of a program: text for people, Graphviz dot for a picture. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "progmodel.h"
#include "strbuf.h"

/* The value's name for people: an input's or a parameter's name, else %id. */
static void value_name(const tk_program_model *m, int id, char *buf, size_t n)
{
    const tk_pm_value *v = id >= 0 ? tk_pm_find_value(m, id) : NULL;
    if (id < 0)
        snprintf(buf, n, "none");
    else if (v && v->name)
        snprintf(buf, n, "%s", v->name);
    else
        snprintf(buf, n, "%%%d", id);
}

/* Whether the printed expression mentions symbol `name` as a whole word. */
static int mentions(const char *expr, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = expr; (p = strstr(p, name)); p += n) {
        int before = p == expr || !(p[-1] == '_' || (p[-1] >= 'a' && p[-1] <= 'z') || (p[-1] >= 'A' && p[-1] <= 'Z') ||
                                    (p[-1] >= '0' && p[-1] <= '9'));
        char c = p[n];
        int after = !(c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'));
        if (before && after)
            return 1;
    }
    return 0;
}

/* "  x: bf16[batch, 128]  batch in [1, 1024]" */
static int value_line(tk_strbuf *sb, const tk_program_model *m, const tk_pm_value *v, const char *label)
{
    int rc = tk_strbuf_addf(sb, "  %s: ", label);
    if (!rc)
        rc = tk_pm_format_shape(sb, v);
    int first = 1;
    for (size_t s = 0; s < m->nsymbols && !rc; s++) {
        int used = 0;
        for (int d = 0; d < v->rank; d++)
            used |= v->dims[d].expr && mentions(v->dims[d].expr, m->symbols[s].name);
        if (!used)
            continue;
        rc = tk_strbuf_addf(sb, "%s%s in [%lld, %lld]", first ? "  " : ", ", m->symbols[s].name,
                            (long long)m->symbols[s].min, (long long)m->symbols[s].max);
        first = 0;
    }
    return rc ? rc : tk_strbuf_adds(sb, "\n");
}

/* The attribute a node passes as argument j, or NULL. */
static const tk_pm_attr *node_attr(const tk_pm_node *n, int j)
{
    for (int a = 0; a < n->nattrs; a++)
        if (n->attrs[a].arg == j)
            return &n->attrs[a];
    return NULL;
}

int tk_program_model_write_text(const tk_program_model *m, FILE *f)
{
    tk_strbuf sb = TK_STRBUF_INIT;
    char name[256];
    int version = TK_TKPROG_VERSION_MIN;
    for (size_t i = 0; i < m->nnodes; i++)
        if (m->nodes[i].nattrs)
            version = TK_TKPROG_VERSION;
    int rc = tk_strbuf_addf(&sb, "program '%s' (tkprog version %d)\n", m->name, version);
    if (!rc)
        rc = tk_strbuf_addf(&sb, "inputs:\n");
    for (size_t i = 0; i < m->ninputs && !rc; i++)
        rc = value_line(&sb, m, &m->inputs[i], m->inputs[i].name);
    if (!rc && m->nparams)
        rc = tk_strbuf_addf(&sb, "parameters:\n");
    for (size_t i = 0; i < m->nparams && !rc; i++)
        rc = value_line(&sb, m, &m->params[i], m->params[i].name);
    if (!rc)
        rc = tk_strbuf_addf(&sb, "nodes:\n");
    for (size_t i = 0; i < m->nnodes && !rc; i++) {
        const tk_pm_node *n = &m->nodes[i];
        rc = tk_strbuf_adds(&sb, "  ");
        for (int j = 0; j < n->nout && !rc; j++) {
            rc = tk_strbuf_addf(&sb, "%s%%%d: ", j ? ", " : "", n->outputs[j].id);
            if (!rc)
                rc = tk_pm_format_shape(&sb, &n->outputs[j]);
        }
        if (!rc)
            rc = tk_strbuf_addf(&sb, " = %s(", n->op);
        for (int j = 0; j < n->nin && !rc; j++) {
            const tk_pm_attr *a = node_attr(n, j);
            rc = tk_strbuf_adds(&sb, j ? ", " : "");
            if (a && !rc) {
                rc = tk_pm_format_attr(&sb, a);
                continue;
            }
            value_name(m, n->inputs[j], name, sizeof name);
            if (!rc)
                rc = tk_strbuf_adds(&sb, name);
        }
        if (!rc)
            rc = tk_strbuf_addf(&sb, ")  at %s:%d\n", n->file, n->line);
    }
    if (!rc)
        rc = tk_strbuf_addf(&sb, "outputs:\n");
    for (size_t i = 0; i < m->noutputs && !rc; i++) {
        char label[32];
        snprintf(label, sizeof label, "out[%zu] = %%%d", i, m->outputs[i].id);
        rc = value_line(&sb, m, &m->outputs[i], label);
    }
    if (!rc && m->nguards)
        rc = tk_strbuf_addf(&sb, "guards:\n");
    for (size_t i = 0; i < m->nguards && !rc; i++)
        rc = tk_strbuf_addf(&sb, "  %s\n", m->guards[i]);
    if (!rc && m->nnotes)
        rc = tk_strbuf_addf(&sb, "notes:\n");
    for (size_t i = 0; i < m->nnotes && !rc; i++)
        rc = tk_strbuf_addf(&sb, "  %s\n", m->notes[i]);
    if (!rc)
        rc = tk_strbuf_addf(&sb, "ops:\n");
    for (size_t i = 0; i < m->nops && !rc; i++) {
        const tk_pm_op *op = &m->ops[i];
        if (op->builtin) {
            rc = tk_strbuf_addf(&sb, "  %s  built into libtkrt\n", op->name);
            continue;
        }
        rc = tk_strbuf_addf(&sb, "  %s  %s (%s)  kernels:", op->name, op->function ? op->function : "?", op->file);
        for (size_t k = 0; k < op->nkernels && !rc; k++)
            rc = tk_strbuf_addf(&sb, "%s%s", k ? ", " : " ", op->kernels[k]);
        if (!rc)
            rc = tk_strbuf_adds(&sb, op->nkernels ? "\n" : " none\n");
    }
    if (!rc && m->nsources)
        rc = tk_strbuf_addf(&sb, "sources:\n");
    /* sizes where the files were read with the program (a .tkprog holds them; a package's
       program.json names its sources without them, and its weights are one of the package's
       entries): a read program has its weights, empty or not */
    int files = m->weights != NULL;
    for (size_t i = 0; i < m->nsources && !rc; i++) {
        rc = tk_strbuf_addf(&sb, "  %s  sha256 %.16s...", m->sources[i].path, m->sources[i].sha256);
        if (!rc)
            rc = files ? tk_strbuf_addf(&sb, "  %zu bytes\n", m->sources[i].len) : tk_strbuf_adds(&sb, "\n");
    }
    if (!rc && files)
        rc = tk_strbuf_addf(&sb, "weights: %zu bytes\n", m->weights_len);
    if (!rc && fwrite(sb.buf, 1, sb.len, f) != sb.len)
        rc = tk_error_set(TK_EIO, "writing the output failed");
    tk_strbuf_release(&sb);
    return rc;
}

/* A dot string literal's contents: quotes and backslashes escaped. */
static int dot_escaped(tk_strbuf *sb, const char *s)
{
    int rc = 0;
    for (; *s && !rc; s++)
        rc = (*s == '"' || *s == '\\') ? tk_strbuf_addf(sb, "\\%c", *s) : tk_strbuf_add(sb, s, 1);
    return rc;
}

static int dot_value(tk_strbuf *sb, const tk_pm_value *v, const char *style)
{
    tk_strbuf shape = TK_STRBUF_INIT;
    int rc = tk_pm_format_shape(&shape, v);
    if (!rc)
        rc = tk_strbuf_addf(sb, "  v%d [shape=ellipse%s, label=\"", v->id, style);
    if (!rc && v->name)
        rc = dot_escaped(sb, v->name);
    if (!rc && !v->name)
        rc = tk_strbuf_addf(sb, "%%%d", v->id);
    if (!rc)
        rc = tk_strbuf_adds(sb, "\\n");
    if (!rc)
        rc = dot_escaped(sb, shape.buf);
    if (!rc)
        rc = tk_strbuf_adds(sb, "\"];\n");
    tk_strbuf_release(&shape);
    return rc;
}

int tk_program_model_write_dot(const tk_program_model *m, FILE *f)
{
    tk_strbuf sb = TK_STRBUF_INIT;
    int rc = tk_strbuf_adds(&sb, "digraph \"");
    if (!rc)
        rc = dot_escaped(&sb, m->name);
    if (!rc)
        rc = tk_strbuf_adds(&sb, "\" {\n  rankdir=TB;\n  node [fontname=\"monospace\"];\n");
    for (size_t i = 0; i < m->ninputs && !rc; i++)
        rc = dot_value(&sb, &m->inputs[i], ", style=bold");
    for (size_t i = 0; i < m->nparams && !rc; i++)
        rc = dot_value(&sb, &m->params[i], ", style=dashed");
    for (size_t i = 0; i < m->nnodes && !rc; i++) {
        const tk_pm_node *n = &m->nodes[i];
        rc = tk_strbuf_addf(&sb, "  n%zu [shape=box, label=\"", i);
        if (!rc)
            rc = dot_escaped(&sb, n->op);
        for (int j = 0; j < n->nattrs && !rc; j++) {
            tk_strbuf at = TK_STRBUF_INIT;
            rc = tk_pm_format_attr(&at, &n->attrs[j]);
            if (!rc)
                rc = tk_strbuf_adds(&sb, j ? ", " : "\\n");
            if (!rc)
                rc = dot_escaped(&sb, at.buf);
            tk_strbuf_release(&at);
        }
        if (!rc)
            rc = tk_strbuf_addf(&sb, "\\n%s:%d\"];\n", n->file, n->line);
        for (int j = 0; j < n->nin && !rc; j++)
            if (n->inputs[j] >= 0)
                rc = tk_strbuf_addf(&sb, "  v%d -> n%zu;\n", n->inputs[j], i);
        for (int j = 0; j < n->nout && !rc; j++) {
            rc = dot_value(&sb, &n->outputs[j], "");
            if (!rc)
                rc = tk_strbuf_addf(&sb, "  n%zu -> v%d;\n", i, n->outputs[j].id);
        }
    }
    for (size_t i = 0; i < m->noutputs && !rc; i++)
        rc = tk_strbuf_addf(&sb, "  out%zu [shape=plaintext, label=\"out[%zu]\"];\n  v%d -> out%zu;\n", i, i,
                            m->outputs[i].id, i);
    if (!rc)
        rc = tk_strbuf_adds(&sb, "}\n");
    if (!rc && fwrite(sb.buf, 1, sb.len, f) != sb.len)
        rc = tk_error_set(TK_EIO, "writing the output failed");
    tk_strbuf_release(&sb);
    return rc;
}
