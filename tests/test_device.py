"""`device.gpu_model`: the GPU model an artifact entry is matched by, from torch's device name. Two GPUs of one
architecture must not share a model unless they are one product (the runtime would apply one's configs to the
other); NVIDIA datacenter names give Ray's accelerator type."""

import pytest

from raytune_attn.device import gpu_model

NAMES = {
    "NVIDIA H100 80GB HBM3": "H100",
    "NVIDIA H100 PCIe": "H100",
    "NVIDIA H100 NVL": "H100",
    "NVIDIA H200": "H200",
    "NVIDIA GH200 480GB": "GH200",
    "NVIDIA A100-SXM4-80GB": "A100",
    "NVIDIA B200": "B200",
    "NVIDIA L40S": "L40S",
    "Tesla V100-SXM2-16GB": "V100",
    "NVIDIA RTX A6000": "A6000",
    "NVIDIA GeForce RTX 4090": "GeForce-RTX-4090",
    "NVIDIA GeForce RTX 4080": "GeForce-RTX-4080",
    "NVIDIA RTX 6000 Ada Generation": "RTX-6000",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": "RTX-PRO-6000",
    "AMD Instinct MI300X": "MI300X",
    "AMD Instinct MI325X": "MI325X",
    "AMD Instinct MI250X/MI250": "MI250X",
    "AMD Instinct MI210": "MI210",
    "AMD Radeon RX 7900 XTX": "Radeon-RX-7900",
    "cpu": "cpu",
}


@pytest.mark.parametrize("name", NAMES)
def test_the_model_of_each_device_name(name):
    assert gpu_model(name) == NAMES[name]


def test_consumer_cards_of_one_architecture_are_told_apart():
    assert gpu_model("NVIDIA GeForce RTX 4090") != gpu_model("NVIDIA GeForce RTX 4080")
    assert gpu_model("NVIDIA GeForce RTX 5090") != gpu_model("NVIDIA RTX PRO 6000 Blackwell Server Edition")
