/* The kernel of vector_add_drv, compiled to a fatbin that the program loads at run time. */
extern "C" __global__ void vec_add(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i] * 0.5f + c[i] * 0.25f;
}
