// The host emulation's cuda_fp16.h (see cuda_runtime.h here): the 16-bit types as storage.
#pragma once
#include "cuda_runtime.h"
#include "cuda_emu_stash.h"
