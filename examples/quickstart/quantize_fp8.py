import torch
import kiln

x = torch.randn(4096, 7168, device="cuda", dtype=torch.bfloat16)
q, scales = kiln.per_token_group_quant_fp8(x, group_size=128)  # float8_e4m3fn, float32 [4096, 56]
