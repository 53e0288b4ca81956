"""The compiler: the stages both back ends share (pipeline.py, kernel.py), then the CPU back end
(llvm.py: LLVM IR, object code, a Module) or the CUDA back end (cuda.py: CUDA C, a launch plan,
nvcc, a CudaModule)."""
