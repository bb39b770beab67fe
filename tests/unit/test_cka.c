/* test_cka.c — toy_linear_cka against a direct computation in feature space (double
 * precision, the definition ||Yc^T Xc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F)) on small
 * random matrices, and the properties CKA is used for: 1 for a set against itself,
 * against an orthogonal transform of itself (column permutation with sign flips), an
 * isotropic scaling or a shifted copy; symmetric; 0 against a constant set. */
#include <math.h>
#include <stdlib.h>

#include "test.h"
#include "toy.h"

static double direct_cka(const float *x, int n, int dx, const float *y, int dy) {
    double *xc = calloc((size_t)(n * dx), sizeof *xc), *yc = calloc((size_t)(n * dy), sizeof *yc);
    for (int j = 0; j < dx; j++) {
        double m = 0;
        for (int i = 0; i < n; i++) m += x[i * dx + j];
        for (int i = 0; i < n; i++) xc[i * dx + j] = x[i * dx + j] - m / n;
    }
    for (int j = 0; j < dy; j++) {
        double m = 0;
        for (int i = 0; i < n; i++) m += y[i * dy + j];
        for (int i = 0; i < n; i++) yc[i * dy + j] = y[i * dy + j] - m / n;
    }
    /* ||A^T B||_F^2 with A [n x da], B [n x db] */
    double xy = 0, xx = 0, yy = 0;
    for (int a = 0; a < dx; a++)
        for (int b = 0; b < dy; b++) {
            double s = 0;
            for (int i = 0; i < n; i++) s += xc[i * dx + a] * yc[i * dy + b];
            xy += s * s;
        }
    for (int a = 0; a < dx; a++)
        for (int b = 0; b < dx; b++) {
            double s = 0;
            for (int i = 0; i < n; i++) s += xc[i * dx + a] * xc[i * dx + b];
            xx += s * s;
        }
    for (int a = 0; a < dy; a++)
        for (int b = 0; b < dy; b++) {
            double s = 0;
            for (int i = 0; i < n; i++) s += yc[i * dy + a] * yc[i * dy + b];
            yy += s * s;
        }
    free(xc);
    free(yc);
    return xy / sqrt(xx * yy);
}

int main(void) {
    unsigned long long rng = 7;
    enum { N = 40, DX = 7, DY = 11 };
    float x[N * DX], y[N * DY], t[N * DX], c[N * DX];
    for (int i = 0; i < N * DX; i++) x[i] = test_rand_normal(&rng);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < DY; j++) /* partly a function of x, partly noise */
            y[i * DY + j] = (j < DX ? x[i * DX + j] * (float)(j + 1) : 0.0f) + test_rand_normal(&rng);
    const double got = toy_linear_cka(x, N, DX, y, DY), want = direct_cka(x, N, DX, y, DY);
    CHECK_MSG(fabs(got - want) <= 1e-6 * want, "CKA %.12f, direct %.12f", got, want);
    CHECK_MSG(got > 0.05 && got < 0.99, "CKA of related sets %.4f", got);
    CHECK_NEAR(toy_linear_cka(y, N, DY, x, DX), got, 1e-9); /* symmetric */
    CHECK_NEAR(toy_linear_cka(x, N, DX, x, DX), 1.0, 1e-9);
    /* an orthogonal transform (a signed permutation of the columns), a scaling, a shift */
    for (int i = 0; i < N; i++)
        for (int j = 0; j < DX; j++) t[i * DX + j] = (j % 2 ? -3.0f : 3.0f) * x[i * DX + (j + 3) % DX] + 5.0f;
    CHECK_NEAR(toy_linear_cka(x, N, DX, t, DX), 1.0, 1e-6);
    for (int i = 0; i < N * DX; i++) c[i] = 2.5f;
    CHECK(toy_linear_cka(x, N, DX, c, DX) == 0.0);
    return test_finish("test_cka");
}
