"""DLPack codes (devices and element type classes), as in dlpack.h."""

from __future__ import annotations

from enum import IntEnum


class DLDeviceType(IntEnum):
    """DLPack device types. Unlike the official binding's, these are enum
    members, so ``(DLDeviceType.kDLCUDA, 0)`` works as a memory type."""

    kDLCPU = 1
    kDLCUDA = 2
    kDLCUDAHost = 3
    kDLOpenCL = 4
    kDLVulkan = 7
    kDLMetal = 8
    kDLVPI = 9
    kDLROCM = 10
    kDLROCMHost = 11
    kDLExtDev = 12
    kDLCUDAManaged = 13
    kDLOneAPI = 14
    kDLWebGPU = 15
    kDLHexagon = 16


class DLDataTypeCode(IntEnum):
    """DLPack element type classes."""

    kDLInt = 0
    kDLUInt = 1
    kDLFloat = 2
    kDLOpaqueHandle = 3
    kDLBfloat = 4
    kDLComplex = 5
    kDLBool = 6
