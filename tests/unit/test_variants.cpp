// Variant families (src/jit/variants.hpp): names, parsing, refusals, manifests, and what a
// variant's module is to the rest of kiln.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>

#include "runtime/module_provider.hpp"
#include "error_of.hpp"
#include "jit/compiler.hpp"
#include "jit/registry.hpp"
#include "jit/variants.hpp"
#include "kiln/error.hpp"
#include "kiln/ops/group_quant.hpp"

using namespace kiln;
using kiln::test::error_of;

namespace {

const VariantFamily& quant_family() {
  const VariantFamily* family = find_variant_family("per_token_group_quant");
  REQUIRE(family != nullptr);
  return *family;
}

std::string temp_file(const std::string& text) {
  char name[] = "/tmp/kiln-manifest-XXXXXX";
  const int fd = mkstemp(name);
  REQUIRE(fd >= 0);
  close(fd);
  std::ofstream(name) << text;
  return name;
}

}  // namespace

TEST_CASE("the quantizer family has exactly the combinations that make sense") {
  const auto variants = all_variants(quant_family());
  // 3 inputs x 3 groups x 2 silu x (e4m3: row/col/col_tma x ue8m0 0/1 + packed with ue8m0; int8: 3 layouts)
  CHECK(variants.size() == 3 * 3 * 2 * (3 * 2 + 1 + 3));
  std::set<std::string> names;
  for (const auto& variant : variants) {
    const std::string name = variant.name();
    CHECK(name.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") == std::string::npos);
    CHECK(name.size() <= 64);  // the cache's file names keep 64 characters of a module name
    names.insert(name);
    // The canonical name and the name=value spelling both parse back to the same variant.
    CHECK(parse_variant(name).name() == name);
    std::string spelled = "per_token_group_quant";
    for (const auto& [parameter, value] : variant.values()) spelled += " " + parameter + "=" + value;
    CHECK(parse_variant(spelled).name() == name);
  }
  CHECK(names.size() == variants.size());
}

TEST_CASE("variant names spell every non-default choice the same way on every machine") {
  CHECK(parse_variant("per_token_group_quant").name() == "per_token_group_quant-bf16-g128-e4m3-row");
  CHECK(parse_variant("per_token_group_quant in=fp32 group=32 scales=packed ue8m0=1 silu=1").name() ==
        "per_token_group_quant-fp32-g32-e4m3-packed-ue8m0-silu");
  ops::QuantVariant v;
  v.input = ops::QuantInput::fp16;
  v.group = 64;
  v.output = ops::QuantOutput::int8;
  v.scales = ops::QuantScales::column_major_tma;
  CHECK(v.module_name() == "per_token_group_quant-fp16-g64-int8-col_tma");
  CHECK(v.description() == "in=fp16 group=64 out=int8 scales=col_tma ue8m0=0 silu=0");
  CHECK(ops::quant_kernels_of(ops::QuantVariant{})[static_cast<std::size_t>(ops::QuantKernel::twin)]);
  CHECK_FALSE(ops::quant_kernels_of(v)[static_cast<std::size_t>(ops::QuantKernel::twin)]);
}

TEST_CASE("impossible and unknown variants are refused with the parameter and the allowed values") {
  CHECK(error_of([] { parse_variant("per_token_group_quant group=48"); }) ==
        "invalid argument 'group': expected one of 32, 64, 128, got '48'");
  CHECK(error_of([] { parse_variant("per_token_group_quant colour=red"); }) ==
        "invalid argument 'parameter': expected one of per_token_group_quant's parameters (in, group, out, scales, "
        "ue8m0, silu), got 'colour'");
  CHECK(error_of([] { parse_variant("no_such_family in=bf16"); }) ==
        "invalid argument 'variant': expected a variant family (per_token_group_quant, per_token_group_quant_batched), "
        "got 'no_such_family'");
  CHECK(error_of([] { parse_variant("per_token_group_quant-bf16-g96-e4m3-row"); })
            .find("a canonical name of per_token_group_quant") != std::string::npos);
  CHECK(error_of([] { parse_variant("per_token_group_quant out=int8 ue8m0=1"); }) ==
        "impossible variant of per_token_group_quant: parameter 'ue8m0': out=int8 takes fp32 scales (ue8m0=0); "
        "UE8M0 scales exist only for out=e4m3");
  CHECK(error_of([] { parse_variant("per_token_group_quant scales=packed"); }).find("needs ue8m0=1") != std::string::npos);
  CHECK(error_of([] { parse_variant("per_token_group_quant in"); }) ==
        "invalid argument 'variant': expected name=value after the family name, got 'in'");
  ops::QuantVariant v;
  v.group = 100;
  CHECK(v.refusal() == "invalid argument 'group': expected one of 32, 64, 128, got '100'");
  CHECK_THROWS_AS(v.module_name(), Error);
}

TEST_CASE("a variant is a module: find_module resolves its name to the family source with its defines") {
  const std::string name = "per_token_group_quant-fp16-g64-int8-col-silu";
  const KernelSource* source = find_module(name);
  REQUIRE(source != nullptr);
  CHECK(source->module == name);
  CHECK(source->family == "common");
  CHECK(source->entries == std::vector<std::string>{"per_token_group_quant"});
  const std::string text(source->text);
  CHECK(text.rfind("// variant " + name + "\n#define KILN_Q_IN 1\n#define KILN_Q_GROUP 64\n#define KILN_Q_OUT 1\n"
                   "#define KILN_Q_SCALES 1\n#define KILN_Q_UE8M0 0\n#define KILN_Q_SILU 1\n#line 1\n// kiln: variant family",
                   0) == 0);
  // Line 1 of the family's file, where compile errors are numbered from.
  CHECK(text.substr(source->prelude_bytes).rfind("// kiln: variant family", 0) == 0);
  CHECK(find_module(name) == source);  // interned: made once, the same object after
  // The family itself is not a module, and is not among the embedded modules warm and prefetch use.
  CHECK(find_module("per_token_group_quant") == nullptr);
  for (const auto& module : embedded_modules()) CHECK(module.module != "per_token_group_quant");
}

TEST_CASE("every variant has its own cache key") {
  const Target target{ComputeCapability{9, 0}, true, OutputKind::cubin};
  const auto options = compile_options(target, false);
  std::set<std::string> keys;
  for (const auto& variant : all_variants(quant_family()))
    keys.insert(module_cache_key(variant_source(variant), target, options).hex());
  CHECK(keys.size() == all_variants(quant_family()).size());
}

TEST_CASE("a manifest lists variants one per line, with comments; a bad line names the file and line") {
  const std::string good = temp_file(
      "# the variants of one model\n"
      "per_token_group_quant in=fp16 group=64   # attention\n"
      "\n"
      "per_token_group_quant-fp32-g32-e4m3-packed-ue8m0-silu\n");
  const auto variants = read_variant_manifest(good);
  REQUIRE(variants.size() == 2);
  CHECK(variants[0].name() == "per_token_group_quant-fp16-g64-e4m3-row");
  CHECK(variants[1].name() == "per_token_group_quant-fp32-g32-e4m3-packed-ue8m0-silu");
  std::remove(good.c_str());

  const std::string bad = temp_file("per_token_group_quant\nper_token_group_quant out=fp4\n");
  CHECK(error_of([&] { read_variant_manifest(bad); }) ==
        bad + ":2: invalid argument 'out': expected one of e4m3, int8, got 'fp4'");
  std::remove(bad.c_str());
  CHECK(error_of([] { read_variant_manifest("/nonexistent/manifest"); }) ==
        "cannot read variant manifest /nonexistent/manifest: No such file or directory");
}
