// Compiled for sm_87 (Orin) with the aarch64 host compiler by tests/boards/test_jetson_toolchain.sh;
// never run on this machine.
__global__ void edgert_probe_scale_f32(float* x, float s, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= s;
}
