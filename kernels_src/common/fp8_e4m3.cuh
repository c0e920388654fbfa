// PLACEHOLDER: being written (fp8 helper).
#pragma once
