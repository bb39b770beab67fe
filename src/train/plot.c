/* plot.c — the loss curve of a training run as a self-contained SVG (no fonts or scripts
 * from elsewhere): the training loss of every step (faint) and its moving average, the
 * evaluation loss as points joined by a line, on axes with round ticks. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "buffer.h"
#include "plot.h"

#define W 800
#define H 480
#define LEFT 70
#define RIGHT 20
#define TOP 40
#define BOTTOM 50

static void put(ty_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(ty_buf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0) ty_buf_append(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* a round step covering span in about n ticks: 1, 2 or 5 times a power of ten */
static double tick_step(double span, int n) {
    const double raw = span / n, p = pow(10, floor(log10(raw))), f = raw / p;
    return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * p;
}

static void xml_text(ty_buf *b, const char *s) {
    for (; *s; s++) {
        if (*s == '<') ty_buf_append(b, "&lt;", 4);
        else if (*s == '>') ty_buf_append(b, "&gt;", 4);
        else if (*s == '&') ty_buf_append(b, "&amp;", 5);
        else ty_buf_append(b, s, 1);
    }
}

char *ty_loss_curve_svg(const char *title, const float *train, int64_t n, const int64_t *eval_step,
                     const float *eval, int64_t n_eval, size_t *len) {
    double lo = INFINITY, hi = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        if (isfinite(train[i])) lo = fmin(lo, train[i]), hi = fmax(hi, train[i]);
    for (int64_t i = 0; i < n_eval; i++)
        if (isfinite(eval[i])) lo = fmin(lo, eval[i]), hi = fmax(hi, eval[i]);
    if (!(lo <= hi)) lo = 0, hi = 1;
    if (hi - lo < 1e-3) hi = lo + 1e-3;
    const double ystep = tick_step(hi - lo, 6);
    lo = floor(lo / ystep) * ystep;
    hi = ceil(hi / ystep) * ystep;
    const double xmax = n > 1 ? (double)n : 1, xstep = tick_step(xmax, 8);
    const double pw = W - LEFT - RIGHT, ph = H - TOP - BOTTOM;
#define X(step) (LEFT + pw * (double)(step) / xmax)
#define Y(v) (TOP + ph * (1.0 - ((double)(v) - lo) / (hi - lo)))

    ty_buf b = {0};
    put(&b, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n", W, H, W, H);
    put(&b, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
    ty_buf_append(&b, "<text x=\"70\" y=\"24\" font-size=\"15\">", 35);
    xml_text(&b, title);
    ty_buf_append(&b, "</text>\n", 8);
    /* grid and ticks */
    for (double y = lo; y <= hi + ystep / 2; y += ystep) {
        put(&b, "<line x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#ddd\"/>\n", LEFT, W - RIGHT, Y(y), Y(y));
        put(&b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", LEFT - 6, Y(y) + 4, y);
    }
    for (double x = 0; x <= xmax + xstep / 2; x += xstep) {
        put(&b, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#eee\"/>\n", X(x), X(x), TOP, H - BOTTOM);
        put(&b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", X(x), H - BOTTOM + 18, x);
    }
    put(&b, "<rect x=\"%d\" y=\"%d\" width=\"%.0f\" height=\"%.0f\" fill=\"none\" stroke=\"#888\"/>\n", LEFT, TOP, pw, ph);
    put(&b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">step</text>\n", LEFT + pw / 2, H - 12);
    put(&b, "<text x=\"16\" y=\"%.1f\" text-anchor=\"middle\" transform=\"rotate(-90 16 %.1f)\">loss</text>\n",
        TOP + ph / 2, TOP + ph / 2);
    /* the training loss, raw and averaged over a window of about n / 50 steps */
    if (n > 0) {
        ty_buf_append(&b, "<polyline fill=\"none\" stroke=\"#9ecae1\" stroke-width=\"1\" points=\"", 64);
        for (int64_t i = 0; i < n; i++)
            if (isfinite(train[i])) put(&b, "%.1f,%.1f ", X(i + 1), Y(train[i]));
        ty_buf_append(&b, "\"/>\n", 4);
        const int64_t win = n / 50 > 1 ? n / 50 : 1;
        ty_buf_append(&b, "<polyline fill=\"none\" stroke=\"#08519c\" stroke-width=\"2\" points=\"", 64);
        double sum = 0;
        int64_t cnt = 0;
        for (int64_t i = 0; i < n; i++) {
            if (isfinite(train[i])) sum += train[i], cnt++;
            if (i >= win && isfinite(train[i - win])) sum -= train[i - win], cnt--;
            if (cnt) put(&b, "%.1f,%.1f ", X(i + 1), Y(sum / (double)cnt));
        }
        ty_buf_append(&b, "\"/>\n", 4);
    }
    if (n_eval > 0) {
        ty_buf_append(&b, "<polyline fill=\"none\" stroke=\"#d94801\" stroke-width=\"2\" points=\"", 64);
        for (int64_t i = 0; i < n_eval; i++) put(&b, "%.1f,%.1f ", X(eval_step[i]), Y(eval[i]));
        ty_buf_append(&b, "\"/>\n", 4);
        for (int64_t i = 0; i < n_eval; i++)
            put(&b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#d94801\"/>\n", X(eval_step[i]), Y(eval[i]));
    }
    /* legend */
    const int lx = W - RIGHT - 190, ly = TOP + 16;
    put(&b, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#08519c\" stroke-width=\"2\"/>"
            "<text x=\"%d\" y=\"%d\">training (moving average)</text>\n", lx, lx + 20, ly, ly, lx + 26, ly + 4);
    if (n_eval > 0)
        put(&b, "<line x1=\"%d\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#d94801\" stroke-width=\"2\"/>"
                "<text x=\"%d\" y=\"%d\">evaluation</text>\n", lx, lx + 20, ly + 18, ly + 18, lx + 26, ly + 22);
    ty_buf_append(&b, "</svg>\n", 7);
#undef X
#undef Y
    if (b.oom) {
        free(b.v);
        return NULL;
    }
    *len = b.n;
    return b.v;
}
