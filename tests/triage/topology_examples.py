"""Pasted GPU topologies (readings/topology.py), shared by the unit tests and the page's parity
test. Verbatim excerpts carry their thread's URL; the others are built to test a rule's edge."""

EXAMPLES = {
    # https://github.com/NVIDIA/nccl/issues/667: only PXB/PIX pairs hang; VT-d off fixed it
    "topo-pcie-only": (
        "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n"
        "GPU0\t X \tPXB\tSYS\tSYS\t0-27,56-83\t0\n"
        "GPU1\tPXB\t X \tSYS\tSYS\t0-27,56-83\t0\n"
        "GPU2\tSYS\tSYS\t X \tPIX\t28-55,84-111\t1\n"
        "GPU3\tSYS\tSYS\tPIX\t X \t28-55,84-111\t1\n"),
    # constructed: an NVLink machine's matrix names no PCIe-only path
    "topo-nvlink": (
        "\tGPU0\tGPU1\tNIC0\tCPU Affinity\n"
        "GPU0\t X \tNV18\tPXB\t0-55\n"
        "GPU1\tNV18\t X \tPXB\t0-55\n"
        "NIC0\tPXB\tPXB\t X \n"),
    # https://github.com/stas00/ml-engineering/issues/1: P2P copies at 2 GB/s against 13-22 staged
    "p2p-slower": (
        "Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)\n"
        "   D\\D     0      1      2 \n"
        "     0 673.20  13.15  13.15 \n"
        "     1  12.99 673.20  22.20 \n"
        "     2  13.00  21.98 673.78 \n"
        "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)\n"
        "   D\\D     0      1      2 \n"
        "     0 673.49   2.60   1.58 \n"
        "     1   2.12 672.33   1.70 \n"
        "     2   2.12   1.60 673.78 \n"),
    # constructed: P2P faster than staged copies, as it should be
    "p2p-healthy": (
        "Unidirectional P2P=Disabled Bandwidth Matrix (GB/s)\n"
        "   D\\D     0      1 \n"
        "     0 673.20  13.00 \n"
        "     1  13.00 673.20 \n"
        "Unidirectional P2P=Enabled Bandwidth (P2P Writes) Matrix (GB/s)\n"
        "   D\\D     0      1 \n"
        "     0 673.49  25.00 \n"
        "     1  25.00 672.33 \n"),
    # https://github.com/pytorch/pytorch/issues/70048: the values are only in the code
    "copy-zeros-literal": (
        "python3\n"
        "a = torch.Tensor([0.6,0.6])\n"
        "b = a.to(\"cuda:0\")\n"
        "print(b.to(\"cuda:1\"))\n"
        "Output:\n"
        "tensor([0., 0.], device='cuda:1')\n"),
    # https://github.com/pytorch/pytorch/issues/56771: only the first copy between the GPUs is lost
    "copy-zeros-first-copy": (
        "import torch\n"
        "X = torch.Tensor([[1.,2.]]).to(\"cuda:0\")\n"
        "print(X)\n"
        "X = X.to(\"cuda:1\")\n"
        "print(X)\n"
        "which outputs:\n"
        "tensor([[1., 2.]], device='cuda:0')\n"
        "tensor([[0., 0.]], device='cuda:1')\n"
        "\n"
        "tensor([[1., 2.]], device='cuda:1')\n"
        "tensor([[1., 2.]], device='cuda:0')\n"),
    # https://github.com/turboderp/exllama/issues/10: hidden states moved between GPUs, elided rows
    "copy-zeros-elided": (
        " !! Moving hidden states from cuda:0 to cuda:1\n"
        "-------\n"
        "tensor([[[ 0.0593261719, -0.7446289062,  0.7128906250,  ...,\n"
        "           0.6777343750,  0.3395996094,  0.5122070312],\n"
        "         [ 0.0980224609, -0.7451171875,  0.6752929688,  ...,\n"
        "           0.6308593750,  0.3728027344,  0.4899902344]]], device='cuda:0',\n"
        "       dtype=torch.float16)\n"
        "-------\n"
        "tensor([[[0., 0., 0.,  ..., 0., 0., 0.],\n"
        "         [0., 0., 0.,  ..., 0., 0., 0.]]], device='cuda:1',\n"
        "       dtype=torch.float16)\n"
        "-------\n"),
    # constructed: the copy kept its values
    "copy-right": (
        ">>> a = torch.tensor([1., 2.], device='cuda:0')\n"
        ">>> a.to('cuda:1')\n"
        "tensor([1., 2.], device='cuda:1')\n"),
    # constructed: zeros made on purpose, and no copy between GPUs
    "zeros-made": (
        ">>> torch.zeros(2, device='cuda:1')\n"
        "tensor([0., 0.], device='cuda:1')\n"
        ">>> torch.tensor([1., 2.], device='cuda:0')\n"
        "tensor([1., 2.], device='cuda:0')\n"),
}
