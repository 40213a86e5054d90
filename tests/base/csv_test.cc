#include "base/csv.h"

#include <catch2/catch.hpp>

namespace armhive {
namespace {

TEST_CASE("csv: plain values pass, separators and quotes are quoted", "[base][csv]") {
  CHECK(csv_field("ci-a") == "ci-a");
  CHECK(csv_field("") == "");
  CHECK(csv_field("a,b") == "\"a,b\"");
  CHECK(csv_field("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(csv_field("two\nlines") == "\"two\nlines\"");
  CHECK(csv_field("cr\r") == "\"cr\r\"");
}

TEST_CASE("csv: formulas stay text, signed numbers stay numbers", "[base][csv][hostile]") {
  CHECK(csv_field("=HYPERLINK(\"x\")") == "\"'=HYPERLINK(\"\"x\"\")\"");
  CHECK(csv_field("+cmd") == "'+cmd");
  CHECK(csv_field("@SUM(A1)") == "'@SUM(A1)");
  CHECK(csv_field("\tx") == "'\tx");
  CHECK(csv_field("-1.5") == "-1.5");
  CHECK(csv_field("+3e2") == "+3e2");
  CHECK(csv_field("-") == "'-");
}

TEST_CASE("csv: a line joins quoted fields and ends in CRLF", "[base][csv]") {
  CHECK(csv_line({"group", "leases"}) == "group,leases\r\n");
  CHECK(csv_line({"team,a", "=1+1", "3"}) == "\"team,a\",'=1+1,3\r\n");
  CHECK(csv_line({}) == "\r\n");
}

}  // namespace
}  // namespace armhive
