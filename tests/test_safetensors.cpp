// safetensors: writer/reader round trip, dtype conversions against hand-decoded bit patterns, every
// malformed header refused with the file and tensor named, and sharded checkpoints via the index.
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "engine/common/error.h"
#include "engine/model/safetensors.h"
#include "tests/test_util.h"

using namespace rose;
using rose::test::contains;
using rose::test::error_of;
using rose::test::TempDir;
namespace fs = std::filesystem;

namespace {

std::string parse_error(const std::string& bytes) {
  return error_of([&] {
    SafetensorsFile::parse({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()},
                           "bad.safetensors");
  });
}

std::span<const uint8_t> as_bytes(const std::vector<uint16_t>& values) {
  return {reinterpret_cast<const uint8_t*>(values.data()), values.size() * 2};
}

std::vector<float> read_all(const SafetensorsFile& file, const std::string& name) {
  const TensorInfo& tensor = file.get(name);
  std::vector<float> values(size_t(tensor.numel()));
  file.read_f32(tensor, values);
  return values;
}

}  // namespace

TEST_CASE("writer output reads back: names, dtypes, shapes, offsets, values, metadata") {
  TempDir dir("safetensors");
  const std::vector<float> w = {1.5f, -2.0f, 0.25f, 3.0f, -0.125f, 7.0f};
  // Half bit patterns decoded by hand: 1.0, -2.0, 65504 (max), 2^-24 (smallest subnormal),
  // 2^-14 (smallest normal), +inf.
  const std::vector<uint16_t> half = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x0400, 0x7C00};
  // bfloat16: 1.0, -3.0, 0.5, 2^-126 * (1 + 1/2) (a normal with mantissa bit).
  const std::vector<uint16_t> bf16 = {0x3F80, 0xC040, 0x3F00, 0x00C0};
  const std::vector<int32_t> ints = {-7, 0, 123456};

  SafetensorsWriter writer;
  writer.add_metadata("format", "pt");
  writer.add_metadata("quote\"d", "line\nbreak");
  writer.add_f32("weight", {2, 3}, w);
  writer.add("half", Dtype::kF16, {6}, as_bytes(half));
  writer.add("bf", Dtype::kBF16, {2, 2}, as_bytes(bf16));
  writer.add("ints", Dtype::kI32, {3},
             {reinterpret_cast<const uint8_t*>(ints.data()), ints.size() * 4});
  writer.add("empty", Dtype::kF32, {0, 4}, {});
  writer.write(dir.path / "m.safetensors");

  const SafetensorsFile file = SafetensorsFile::open(dir.path / "m.safetensors");
  REQUIRE(file.tensors().size() == 5);
  CHECK(file.tensors()[0].name == "weight");
  CHECK(file.metadata().at("format") == "pt");
  CHECK(file.metadata().at("quote\"d") == "line\nbreak");

  const TensorInfo& weight = file.get("weight");
  CHECK(weight.dtype == Dtype::kF32);
  CHECK(weight.shape == std::vector<int64_t>{2, 3});
  CHECK(weight.data_begin == 0);
  CHECK(weight.data_end == 24);
  CHECK(read_all(file, "weight") == w);

  const std::vector<float> h = read_all(file, "half");
  CHECK(h[0] == 1.0f);
  CHECK(h[1] == -2.0f);
  CHECK(h[2] == 65504.0f);
  CHECK(h[3] == std::ldexp(1.0f, -24));
  CHECK(h[4] == std::ldexp(1.0f, -14));
  CHECK(std::isinf(h[5]));

  const std::vector<float> b = read_all(file, "bf");
  CHECK(b == std::vector<float>{1.0f, -3.0f, 0.5f, std::ldexp(1.5f, -126)});
  CHECK(read_all(file, "ints") == std::vector<float>{-7.0f, 0.0f, 123456.0f});
  CHECK(file.get("empty").numel() == 0);
  CHECK(file.find("absent") == nullptr);
}

TEST_CASE("float to half and bfloat16 round to nearest even") {
  CHECK(f32_to_f16(1.0f) == 0x3C00);
  CHECK(f32_to_f16(-2.0f) == 0xC000);
  CHECK(f32_to_f16(1.0f + std::ldexp(1.0f, -11)) == 0x3C00);      // tie, even stays
  CHECK(f32_to_f16(1.0f + 3 * std::ldexp(1.0f, -11)) == 0x3C02);  // tie, odd rounds up
  CHECK(f32_to_f16(65504.0f) == 0x7BFF);
  CHECK(f32_to_f16(65520.0f) == 0x7C00);  // rounds past the largest half
  CHECK(f32_to_f16(std::ldexp(1.0f, -24)) == 0x0001);
  CHECK(f32_to_f16(std::ldexp(1.0f, -26)) == 0x0000);  // a quarter unit rounds to zero
  CHECK(f32_to_bf16(1.0f) == 0x3F80);
  CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3F80);      // tie, even stays
  CHECK(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3F82);  // tie, odd rounds up
  CHECK(f32_to_bf16(-3.0f) == 0xC040);
}

TEST_CASE("every malformed file is an error naming the file and the tensor") {
  const std::string eight_bytes(8, '\0');
  const std::string w_f32_2 = R"("w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";

  SUBCASE("shorter than the length field") {
    const std::string e = parse_error("abc");
    CHECK(contains(e, "bad.safetensors"));
    CHECK(contains(e, "too short"));
  }
  SUBCASE("header length past the end of the file") {
    std::string bytes = SafetensorsWriter::raw("{}", "");
    const uint64_t huge = 1000;
    std::memcpy(bytes.data(), &huge, 8);
    const std::string e = parse_error(bytes);
    CHECK(contains(e, "bad.safetensors"));
    CHECK(contains(e, "header length 1000"));
  }
  SUBCASE("header length near 2^64 does not wrap") {
    std::string bytes = SafetensorsWriter::raw("{}", "");
    const uint64_t huge = ~uint64_t(0) - 4;
    std::memcpy(bytes.data(), &huge, 8);
    CHECK(contains(parse_error(bytes), "runs past the end"));
  }
  SUBCASE("header not JSON") {
    const std::string e = parse_error(SafetensorsWriter::raw("{\"w\": [", ""));
    CHECK(contains(e, "bad.safetensors"));
    CHECK(contains(e, "not valid JSON"));
  }
  SUBCASE("header not an object") {
    CHECK(contains(parse_error(SafetensorsWriter::raw("[1, 2]", "")), "not a JSON object"));
  }
  SUBCASE("offsets past the end of the data") {
    const std::string e = parse_error(SafetensorsWriter::raw("{" + w_f32_2 + "}", "1234"));
    CHECK(contains(e, "bad.safetensors"));
    CHECK(contains(e, "'w'"));
    CHECK(contains(e, "past the end"));
  }
  SUBCASE("overlapping tensors") {
    const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
    const std::string e = parse_error(SafetensorsWriter::raw(header, std::string(12, 'x')));
    CHECK(contains(e, "'a'"));
    CHECK(contains(e, "'b'"));
    CHECK(contains(e, "overlap"));
  }
  SUBCASE("one data_offsets value") {
    const std::string e = parse_error(SafetensorsWriter::raw(
        R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", eight_bytes));
    CHECK(contains(e, "'w'"));
    CHECK(contains(e, "data_offsets"));
  }
  SUBCASE("three data_offsets values") {
    CHECK(contains(parse_error(SafetensorsWriter::raw(
                       R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})", eight_bytes)),
                   "got 3 values"));
  }
  SUBCASE("end before begin") {
    const std::string e = parse_error(SafetensorsWriter::raw(
        R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", eight_bytes));
    CHECK(contains(e, "'w'"));
    CHECK(contains(e, "end before"));
  }
  SUBCASE("negative or fractional offsets") {
    CHECK(contains(parse_error(SafetensorsWriter::raw(
                       R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", eight_bytes)),
                   "non-negative integers"));
    CHECK(contains(parse_error(SafetensorsWriter::raw(
                       R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8.0]}})", eight_bytes)),
                   "non-negative integers"));
  }
  SUBCASE("unknown dtype") {
    const std::string e = parse_error(SafetensorsWriter::raw(
        R"({"w":{"dtype":"F12","shape":[2],"data_offsets":[0,8]}})", eight_bytes));
    CHECK(contains(e, "'w'"));
    CHECK(contains(e, "unknown dtype 'F12'"));
  }
  SUBCASE("shape and offsets disagree") {
    const std::string e = parse_error(SafetensorsWriter::raw(
        R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight_bytes));
    CHECK(contains(e, "'w'"));
    CHECK(contains(e, "hold 8 bytes"));
    CHECK(contains(e, "needs 12"));
  }
  SUBCASE("shape whose byte count overflows 64 bits") {
    const std::string e = parse_error(SafetensorsWriter::raw(
        R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})", ""));
    CHECK(contains(e, "'w'"));
    CHECK(contains(e, "overflows"));
  }
  SUBCASE("negative shape") {
    CHECK(contains(parse_error(SafetensorsWriter::raw(
                       R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight_bytes)),
                   "non-negative integers"));
  }
  SUBCASE("missing fields or wrong types") {
    CHECK(contains(parse_error(SafetensorsWriter::raw(R"({"w":{"shape":[2],"data_offsets":[0,8]}})",
                                                      eight_bytes)),
                   "'dtype'"));
    CHECK(contains(parse_error(SafetensorsWriter::raw(
                       R"({"w":{"dtype":"F32","shape":2,"data_offsets":[0,8]}})", eight_bytes)),
                   "'shape'"));
    CHECK(contains(
        parse_error(SafetensorsWriter::raw(R"({"w":{"dtype":"F32","shape":[2]}})", eight_bytes)),
        "'data_offsets'"));
    CHECK(contains(parse_error(SafetensorsWriter::raw(R"({"w":7})", eight_bytes)), "'w'"));
  }
  SUBCASE("duplicate tensor names") {
    const std::string e =
        parse_error(SafetensorsWriter::raw("{" + w_f32_2 + "," + w_f32_2 + "}", eight_bytes));
    CHECK(contains(e, "'w' appears twice"));
  }
  SUBCASE("metadata values must be strings") {
    CHECK(contains(parse_error(SafetensorsWriter::raw(R"({"__metadata__":{"n":1}})", "")),
                   "__metadata__"));
  }
  SUBCASE("a tensor that is not there") {
    SafetensorsWriter writer;
    writer.add_f32("present", {1}, std::vector<float>{1.0f});
    const std::string bytes = writer.serialize();
    const SafetensorsFile file = SafetensorsFile::parse(
        {reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()}, "bad.safetensors");
    const std::string e = error_of([&] { file.get("absent"); });
    CHECK(contains(e, "bad.safetensors"));
    CHECK(contains(e, "'absent'"));
  }
}

TEST_CASE("a truncated file on disk is refused with its path") {
  TempDir dir("safetensors");
  SafetensorsWriter writer;
  writer.add_f32("first", {4}, std::vector<float>{1, 2, 3, 4});
  writer.add_f32("last", {4}, std::vector<float>{5, 6, 7, 8});
  const std::string bytes = writer.serialize();
  const fs::path path = dir.path / "cut.safetensors";
  write_file(path, std::string_view(bytes).substr(0, bytes.size() - 3));
  const std::string e = error_of([&] { SafetensorsFile::open(path); });
  CHECK(contains(e, path.string()));
  CHECK(contains(e, "'last'"));
  CHECK(contains(e, "past the end"));

  write_file(path, std::string_view(bytes).substr(0, 20));  // cut inside the header
  CHECK(contains(error_of([&] { SafetensorsFile::open(path); }), "header length"));
  CHECK(contains(error_of([&] { SafetensorsFile::open(dir.path / "missing.safetensors"); }),
                 "missing.safetensors"));
}

TEST_CASE("sharded checkpoints resolve every tensor through the index") {
  TempDir dir("safetensors");
  SafetensorsWriter first;
  first.add_f32("a", {2}, std::vector<float>{1, 2});
  first.add_f32("b", {1}, std::vector<float>{3});
  first.write(dir.path / "model-00001-of-00002.safetensors");
  SafetensorsWriter second;
  second.add_f32("c", {3}, std::vector<float>{4, 5, 6});
  second.write(dir.path / "model-00002-of-00002.safetensors");
  const std::string index =
      R"({"metadata": {"total_size": 24}, "weight_map": {)"
      R"("a": "model-00001-of-00002.safetensors", "b": "model-00001-of-00002.safetensors", )"
      R"("c": "model-00002-of-00002.safetensors"}})";
  write_file(dir.path / "model.safetensors.index.json", index);

  const SafetensorsCheckpoint checkpoint = SafetensorsCheckpoint::open(dir.path);
  CHECK(checkpoint.files().size() == 2);
  CHECK(checkpoint.names() == std::vector<std::string>{"a", "b", "c"});
  const SafetensorsCheckpoint::Entry c = checkpoint.find("c");
  REQUIRE(c.tensor != nullptr);
  CHECK(contains(c.file->source(), "model-00002-of-00002"));
  std::vector<float> values(3);
  c.file->read_f32(*c.tensor, values);
  CHECK(values == std::vector<float>{4, 5, 6});
  CHECK(checkpoint.find("zzz").tensor == nullptr);

  SUBCASE("index naming a tensor its shard lacks") {
    write_file(dir.path / "model.safetensors.index.json",
               R"({"weight_map": {"a": "model-00002-of-00002.safetensors"}})");
    const std::string e = error_of([&] { SafetensorsCheckpoint::open(dir.path); });
    CHECK(contains(e, "model.safetensors.index.json"));
    CHECK(contains(e, "'a'"));
  }
  SUBCASE("index naming a shard that does not exist") {
    write_file(dir.path / "model.safetensors.index.json",
               R"({"weight_map": {"a": "model-00009.safetensors"}})");
    CHECK(contains(error_of([&] { SafetensorsCheckpoint::open(dir.path); }),
                   "model-00009.safetensors"));
  }
  SUBCASE("a malformed shard is named") {
    write_file(dir.path / "model-00002-of-00002.safetensors", "garbage!!");
    CHECK(contains(error_of([&] { SafetensorsCheckpoint::open(dir.path); }),
                   "model-00002-of-00002.safetensors"));
  }
  SUBCASE("index without weight_map") {
    write_file(dir.path / "model.safetensors.index.json", R"({"metadata": {}})");
    CHECK(contains(error_of([&] { SafetensorsCheckpoint::open(dir.path); }), "weight_map"));
  }
  SUBCASE("shard names may not leave the folder") {
    write_file(dir.path / "model.safetensors.index.json",
               R"({"weight_map": {"a": "../model-00001-of-00002.safetensors"}})");
    CHECK(contains(error_of([&] { SafetensorsCheckpoint::open(dir.path); }), "beside the index"));
  }
}

TEST_CASE("a folder without any checkpoint is an error naming it") {
  TempDir dir("safetensors");
  const std::string e = error_of([&] { SafetensorsCheckpoint::open(dir.path); });
  CHECK(contains(e, dir.path.string()));
  CHECK(contains(e, "model.safetensors"));
}
