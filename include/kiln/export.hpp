#pragma once
/// @file
/// `KILN_API`: what libkiln exports. The library is built with hidden visibility, so a class or
/// function of the public headers is callable from an embedder only when it carries this mark
/// (docs/architecture.md, "What the library exports"). Inline code and plain structs need none.

#define KILN_API __attribute__((visibility("default")))
