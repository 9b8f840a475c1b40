// Catch2 v2/v3 shim: tests include "support/catch.hpp" and use Approx either way.
#pragma once
#if __has_include(<catch2/catch_all.hpp>)
#include <catch2/catch_all.hpp>
using Catch::Approx;
#else
#include <catch2/catch.hpp>
#endif
