"""Accelerator rows of ``train.flops.GPUS`` (``plan --gpu``, the trainer's MFU): one file per vendor, each
row a :class:`~preschool.train.flops.GPU` registered under its ``--gpu`` name. A new accelerator is a new
file here (or a plug-in's ``gpus`` module): its datasheet's dense bf16 peak and memory, where they come
from, and the words its ``torch.cuda.get_device_name()`` contains."""
