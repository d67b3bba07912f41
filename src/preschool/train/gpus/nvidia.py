"""NVIDIA data-centre GPUs (datasheet figures; dense bf16 = the sparse figure / 2 where only that is printed)."""

from ..flops import GIB, GPU, GPUS

GPUS.register("a100-40gb")(GPU(
    "NVIDIA A100 40GB (SXM)", 312e12, 40 * GIB,
    "NVIDIA A100 Tensor Core GPU datasheet: BF16 Tensor Core 312 TFLOPS (624 with sparsity), 40GB HBM2",
    device_words=("a100",)))
GPUS.register("a100-80gb")(GPU(
    "NVIDIA A100 80GB (SXM)", 312e12, 80 * GIB,
    "NVIDIA A100 Tensor Core GPU datasheet: BF16 Tensor Core 312 TFLOPS, 80GB HBM2e",
    device_words=("a100", "80")))
GPUS.register("h100-80gb")(GPU(
    "NVIDIA H100 SXM 80GB", 989e12, 80 * GIB,
    "NVIDIA H100 Tensor Core GPU datasheet (SXM): BF16 Tensor Core 1,979 TFLOPS with sparsity = 989 dense, 80GB HBM3",
    device_words=("h100",)))
# 141 GB taken as 141e9 bytes (131 GiB): the lower reading of the datasheet's "GB"
GPUS.register("h200")(GPU(
    "NVIDIA H200 SXM 141GB", 989e12, 141 * 10**9,
    "NVIDIA H200 Tensor Core GPU datasheet (SXM): BF16 Tensor Core 1,979 TFLOPS with sparsity = 989 dense, "
    "141GB HBM3e",
    device_words=("h200",)))
