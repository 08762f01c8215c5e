// Loading, version negotiation and refusal: each fixture library bends the contract one way.
#include <cotune/core/abi/components.hpp>
#include <cotune/core/errors.hpp>
#include <cotune/core/registry.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

namespace cotune::core {
namespace {

std::string fixture(const std::string& name) {
  return std::string(COTUNE_ABI_FIXTURE_DIR) + "/libcotune-predictor-abi" + name + ".so";
}

// Loads one fixture into a fresh registry and returns the refusal reason ("" when it loaded).
std::string refusal(const std::string& name) {
  Registry reg;
  if (reg.load_file(fixture(name))) return "";
  return reg.problems().back().reason;
}

TEST(Abi, GoodPluginLoadsAndWorks) {
  Registry reg;
  ASSERT_TRUE(reg.load_file(fixture("good")));
  ASSERT_EQ(reg.components().size(), 1u);
  const ComponentInfo& info = reg.components()[0].info;
  EXPECT_EQ(info.id, "org.cotune.test.abi-mean");
  EXPECT_EQ(info.name, "abi-mean");
  EXPECT_EQ(info.version, "1.0.0");
  EXPECT_EQ(info.abi_major, 1u);
  auto p = reg.make_predictor("abi-mean");
  const double x[3] = {0, 0, 0}, y[3] = {1, 2, 6};
  p->fit(x, 3, 1, y);
  double out[2];
  p->predict(x, 2, 1, out);
  EXPECT_DOUBLE_EQ(out[0], 3.0);
  ASSERT_TRUE(p->can_save());
  auto q = reg.make_predictor("org.cotune.test.abi-mean");
  q->load(p->save());
  q->predict(x, 1, 1, out);
  EXPECT_DOUBLE_EQ(out[0], 3.0);
}

TEST(Abi, OlderMinorLoadsWithoutItsOptionalFunctions) {
  Registry reg;
  ASSERT_TRUE(reg.load_file(fixture("older"))) << reg.problems().back().reason;
  EXPECT_EQ(reg.components()[0].info.abi_minor, 0u);
  auto p = reg.make_predictor("abi-mean");
  // save/load lie beyond the older table's struct_size: the host must not read them.
  EXPECT_FALSE(p->can_save());
  EXPECT_THROW(p->save(), PluginError);
  EXPECT_EQ(p->describe_fit(), "{}");
  const double x[1] = {0}, y[1] = {5};
  p->fit(x, 1, 1, y);
  double out = 0;
  p->predict(x, 1, 1, &out);
  EXPECT_DOUBLE_EQ(out, 5.0);
}

TEST(Abi, NewerMinorLoadsAndUnknownFieldsAreIgnored) {
  Registry reg;
  ASSERT_TRUE(reg.load_file(fixture("newer"))) << reg.problems().back().reason;
  EXPECT_EQ(reg.components()[0].info.abi_minor, static_cast<uint32_t>(COTUNE_ABI_MINOR + 1));
  auto p = reg.make_predictor("abi-mean");
  EXPECT_TRUE(p->can_save());
  const double x[2] = {0, 0}, y[2] = {1, 3};
  p->fit(x, 2, 1, y);
  double out = 0;
  p->predict(x, 1, 1, &out);
  EXPECT_DOUBLE_EQ(out, 2.0);
}

TEST(Abi, RefusalsNameTheReason) {
  // The fixture claims major 2 with this SDK's minor.
  EXPECT_NE(refusal("major2").find("built for ABI 2." + std::to_string(COTUNE_ABI_MINOR) + ", this host speaks ABI 1.x"),
            std::string::npos);
  EXPECT_NE(refusal("noentry").find("no entry symbol cotune_plugin_entry_v1"), std::string::npos);
  EXPECT_NE(refusal("nullentry").find("returned NULL"), std::string::npos);
  EXPECT_NE(refusal("smallstruct").find("struct_size"), std::string::npos);
  EXPECT_NE(refusal("zerosize").find("plugin descriptor struct_size 0"), std::string::npos);
  EXPECT_NE(refusal("nullapi").find("NULL function table"), std::string::npos);
  EXPECT_NE(refusal("missingfn").find("has no predict function"), std::string::npos);
  {
    Registry reg;
    EXPECT_FALSE(reg.load_file(std::string(COTUNE_ABI_FIXTURE_DIR) + "/libcotune-space-abipartialtable.so"));
    EXPECT_NE(reg.problems().back().reason.find("offers part of a table schema: table_schema, table_read and "
                                                "table_write come together"),
              std::string::npos)
        << reg.problems().back().reason;
  }
  EXPECT_NE(refusal("badutf8").find("not valid UTF-8"), std::string::npos);
  EXPECT_NE(refusal("dupinside").find("appears twice"), std::string::npos);
  EXPECT_NE(refusal("hugecount").find("components (limit 256)"), std::string::npos);
}

// Descriptors full of nonsense: NULL tables, zero sizes, negative values seen as unsigned, strings
// NULL, empty, holding a NUL, or longer than anything real. Each is refused with its own reason,
// naming the file, and the host goes on (the next load in the same registry still works).
TEST(Abi, NonsenseDescriptorsAreRefusedWithAReason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"zerocount", "the plugin declares no components"},
      {"nulllist", "the component list is NULL"},
      {"nullitem", "component 1 is NULL"},
      {"componentzerosize", "component 0: struct_size 0 is smaller than"},
      {"apizerosize", "predictor table struct_size 0 is smaller than"},
      {"negativekind", "component 0: unknown kind -1"},
      {"nullstring", "component 0 id is NULL"},
      {"longstring", "component 'org.cotune.test.abi-mean' name is longer than 4096 bytes"},
      {"emptyid", "component 0 id is empty"},
      {"nulinside", "component 'org.cotune.test.abi-mean' name is not valid UTF-8"},
      {"swappedversion", "component 'org.cotune.test.abi-mean' version 'ABI fixture: predicts the mean target.' is "
                         "not MAJOR.MINOR.PATCH, such as 1.0.0 (it reads as a description: the C++ helper's"},
      {"badid", "component 0 id 'not an id' is not a reverse-DNS id"},
      {"badname", "component 'org.cotune.test.abi-mean' name 'abi mean' is not one a study file can name it by"},
      {"shortversion", "component 'org.cotune.test.abi-mean' version '1.0' is not MAJOR.MINOR.PATCH, such as 1.0.0"},
  };
  Registry reg;
  for (const auto& [name, reason] : cases) {
    EXPECT_FALSE(reg.load_file(fixture(name))) << name;
    ASSERT_FALSE(reg.problems().empty());
    EXPECT_NE(reg.problems().back().reason.find(reason), std::string::npos) << name << ": " << reg.problems().back().reason;
    EXPECT_NE(reg.problems().back().file.find("abi" + name), std::string::npos);
  }
  EXPECT_TRUE(reg.components().empty());
  // The C++ helper's field order is named only where the version reads as a description.
  for (const LoadProblem& p : reg.problems()) {
    if (p.file.find("abishortversion") != std::string::npos) {
      EXPECT_EQ(p.reason.find("C++"), std::string::npos) << p.reason;
    }
  }
  ASSERT_TRUE(reg.load_file(fixture("good")));
  EXPECT_EQ(reg.components().size(), 1u);
}

// Copies the good fixture into a temporary file, lets `damage` change its bytes, and returns the
// refusal reason for the damaged copy.
std::string refusal_of_damaged_copy(const std::function<void(std::string&)>& damage) {
  std::ifstream in(fixture("good"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  damage(bytes);
  char path[] = "/tmp/cotune-abi-damaged-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) return "mkstemp failed";
  ::close(fd);
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  Registry reg;
  const bool loaded = reg.load_file(path);
  std::remove(path);
  return loaded ? "" : reg.problems().back().reason;
}

TEST(Abi, TruncatedLibraryIsRefused) {
  const std::string reason = refusal_of_damaged_copy([](std::string& b) { b.resize(b.size() / 3); });
  EXPECT_NE(reason.find("cannot load: truncated"), std::string::npos) << reason;
}

TEST(Abi, LibraryForAnotherArchitectureIsRefused) {
  // e_machine (offset 18 of the ELF header, little-endian) set to EM_AARCH64 (183) or, on an
  // aarch64 host, to EM_X86_64 (62).
  const std::string reason = refusal_of_damaged_copy([](std::string& b) {
    const unsigned char machine = static_cast<unsigned char>(b[18]) == 183 ? 62 : 183;
    b[18] = static_cast<char>(machine);
    b[19] = 0;
  });
  EXPECT_NE(reason.find("cannot load: built for "), std::string::npos) << reason;
}

TEST(Abi, LengthsNotTerminatorsDelimitStrings) {
  Registry reg;
  ASSERT_TRUE(reg.load_file(fixture("unterminated"))) << reg.problems().back().reason;
  EXPECT_EQ(reg.components()[0].info.id, "org.cotune.test.abi-mean");
  EXPECT_EQ(reg.components()[0].info.name, "abi-mean");
}

TEST(Abi, DuplicateIdAcrossLibrariesIsRefusedAndTheRestStillLoad) {
  Registry reg;
  reg.load_directories({COTUNE_ABI_FIXTURE_DIR});
  // Of the two valid libraries with the id org.cotune.test.abi-mean (abiduplicate, abigood: sorted,
  // abiduplicate first), exactly one is loaded and the other refused as a duplicate.
  size_t with_id = 0;
  for (const auto& c : reg.components()) with_id += c.info.id == "org.cotune.test.abi-mean";
  EXPECT_EQ(with_id, 1u);
  bool duplicate_refused = false;
  for (const auto& p : reg.problems())
    duplicate_refused |= p.reason.find("is already provided by") != std::string::npos;
  EXPECT_TRUE(duplicate_refused);
  EXPECT_NE(reg.try_find(COTUNE_KIND_PREDICTOR, "throwing"), nullptr);
  // Every broken fixture was refused with a reason naming its file.
  EXPECT_GE(reg.problems().size(), 10u);
  for (const auto& p : reg.problems()) {
    EXPECT_FALSE(p.file.empty());
    EXPECT_FALSE(p.reason.empty());
  }
}

TEST(Abi, EmptyFileIsRefused) {
  const std::string reason = refusal_of_damaged_copy([](std::string& b) { b.clear(); });
  EXPECT_NE(reason.find("cannot load: not a shared library (too short"), std::string::npos) << reason;
}

TEST(Abi, NotASharedLibraryIsRefused) {
  Registry reg;
  EXPECT_FALSE(reg.load_file(COTUNE_ABI_FIXTURE_DIR "/../../../CMakeCache.txt"));
  EXPECT_NE(reg.problems().back().reason.find("cannot load: not a shared library"), std::string::npos);
  EXPECT_FALSE(reg.load_file("/nonexistent/libcotune-x.so"));
  EXPECT_NE(reg.problems().back().reason.find("cannot open"), std::string::npos);
}

TEST(Abi, ExceptionsBecomeErrorObjects) {
  Registry reg;
  ASSERT_TRUE(reg.load_file(fixture("throwing")));
  try {
    reg.make_predictor("throwing", "{\"throw-in-create\": true}");
    FAIL() << "create should have failed";
  } catch (const PluginError& e) {
    EXPECT_EQ(e.code(), COTUNE_ERR_INTERNAL);
    EXPECT_NE(std::string(e.what()).find("create refused"), std::string::npos);
  }
  auto p = reg.make_predictor("throwing", "{}");
  const double x[2] = {1, 2}, y[2] = {1, 2};
  try {
    p->fit(x, 2, 1, y);
    FAIL() << "fit should have failed";
  } catch (const PluginError& e) {
    EXPECT_EQ(e.code(), COTUNE_ERR_INVALID_ARGUMENT);
    EXPECT_NE(std::string(e.what()).find("org.cotune.test.throwing: fit: this predictor never fits"), std::string::npos);
  }
  double out[2];
  try {
    p->predict(x, 2, 1, out);
    FAIL();
  } catch (const PluginError& e) {
    EXPECT_NE(std::string(e.what()).find("out of range"), std::string::npos);
  }
  try {
    p->predict(x, 1, 1, out);  // throws a plain int inside the plugin
    FAIL();
  } catch (const PluginError& e) {
    EXPECT_EQ(e.code(), COTUNE_ERR_INTERNAL);
    EXPECT_NE(std::string(e.what()).find("unknown exception"), std::string::npos);
  }
}

TEST(Abi, LibraryStaysLoadedWhileAComponentLives) {
  std::unique_ptr<Predictor> p;
  {
    Registry reg;
    ASSERT_TRUE(reg.load_file(fixture("good")));
    p = reg.make_predictor("abi-mean");
  }  // the registry is gone; the predictor still holds the library
  const double x[1] = {0}, y[1] = {7};
  p->fit(x, 1, 1, y);
  double out = 0;
  p->predict(x, 1, 1, &out);
  EXPECT_DOUBLE_EQ(out, 7.0);
}

TEST(Abi, PlainCPluginIsLoadedAndUsed) {
  Registry reg;
  ASSERT_TRUE(reg.load_file(COTUNE_PLUGIN_DIR "/libcotune-predictor-c-linear.so"));
  auto p = reg.make_predictor("c-linear", "{\"lambda\": 0}");
  // y = 3 + 2 x0 - x1, exactly linear.
  std::vector<double> x, y;
  for (int i = 0; i < 20; ++i) {
    x.push_back(i);
    x.push_back((i * 7) % 5);
    y.push_back(3 + 2.0 * i - (i * 7) % 5);
  }
  p->fit(x.data(), 20, 2, y.data());
  const double probe[2] = {100, 1};
  double out = 0;
  p->predict(probe, 1, 2, &out);
  EXPECT_NEAR(out, 202.0, 1e-6);
  auto q = reg.make_predictor("c-linear");
  q->load(p->save());
  double again = 0;
  q->predict(probe, 1, 2, &again);
  EXPECT_DOUBLE_EQ(again, out);
  EXPECT_THROW(q->load("garbage"), PluginError);
  EXPECT_THROW(q->load("cotune-linear 2 0 3 0\n"), PluginError);            // another version
  EXPECT_THROW(q->load("cotune-linear 1 2 3 0\n1 1 1\n1 1\n"), PluginError);  // a triple short
  EXPECT_THROW(q->load("cotune-linear 1 1 3 0\n1 1e999 1\n"), PluginError);   // a number out of range
  q->load("cotune-linear 1 1 3 0\n0 1 2\n");  // y = 3 + 2 x0, by hand
  q->predict(probe, 1, 1, &again);
  EXPECT_DOUBLE_EQ(again, 203.0);
  EXPECT_THROW(reg.make_predictor("c-linear", "{\"lambda\": \"big\"}"), PluginError);
}

TEST(Abi, PluginsCheckCommandReportsUnusableLibraries) {
  const std::string cli = COTUNE_CLI;
  EXPECT_EQ(std::system((cli + " plugins check " + fixture("good") + " > /dev/null").c_str()), 0);
  EXPECT_NE(std::system((cli + " plugins check " + fixture("major2") + " > /dev/null 2>&1").c_str()), 0);
}

}  // namespace
}  // namespace cotune::core
