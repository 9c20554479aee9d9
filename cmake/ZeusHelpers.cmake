# zeus_add_library(<layer> SOURCES ... PUBLIC_DEPS ... PRIVATE_DEPS ...)
# Builds the static library zeus_<layer>, exposed as zeus::<layer>, installed and exported in its
# own file zeus_<layer>Targets.cmake: the package's component <layer> (cmake/zeusConfig.cmake.in).
function(zeus_add_library layer)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  set(target zeus_${layer})
  add_library(${target} STATIC ${ARG_SOURCES})
  add_library(zeus::${layer} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${layer} OUTPUT_NAME zeus_${layer})
  # include/ holds the installed, public headers (with the generated zeus/version.hpp and
  # zeus/export.hpp beside them in the build tree); src/ the internal ones (spelled
  # "<layer>/x.hpp"), visible inside the build tree only.
  target_include_directories(${target} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                              $<BUILD_INTERFACE:${ZEUS_GENERATED_INCLUDE_DIR}>
                                              $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/src>
                                              $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
                                       PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_features(${target} PUBLIC cxx_std_20)
  # zeus/export.hpp: ZEUS_EXPORT marks the library's own symbols while it is being built.
  target_compile_definitions(${target} PRIVATE ZEUS_BUILDING_LIBRARY)
  target_link_libraries(${target} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS}
                                  $<BUILD_INTERFACE:zeus_warnings>)
  install(TARGETS ${target} EXPORT zeus_${layer}Targets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
                            LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  set_property(GLOBAL APPEND PROPERTY ZEUS_COMPONENTS ${layer})
endfunction()

# zeus_add_gtest(<name> SOURCES ... DEPS ... [LABELS ...] [SERIAL])
# SERIAL: CTest runs its tests alone (timing ratios that tests running beside them would skew).
# Paths a test needs (fake libraries, the CLI) are passed as compile definitions, not environment.
# One GoogleTest binary, registered test by test with CTest. Label `unit` unless given; several
# labels ("unit;threaded") are set by an include file that runs after the discovered tests are
# added (gtest_discover_tests cannot pass a list in PROPERTIES).
function(zeus_add_gtest name)
  cmake_parse_arguments(ARG "SERIAL" "" "SOURCES;DEPS;LABELS" ${ARGN})
  set(serial OFF)
  if(ARG_SERIAL)
    set(serial ON)
  endif()
  if(NOT ARG_LABELS)
    set(ARG_LABELS unit)
  endif()
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock zeus_warnings)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  include(GoogleTest)
  list(LENGTH ARG_LABELS label_count)
  if(label_count EQUAL 1)
    gtest_discover_tests(${name} PROPERTIES LABELS "${ARG_LABELS}" RUN_SERIAL ${serial}
                         DISCOVERY_TIMEOUT 60)
  else()
    gtest_discover_tests(${name} TEST_LIST ${name}_TESTS DISCOVERY_TIMEOUT 60)
    set(labels_file ${CMAKE_CURRENT_BINARY_DIR}/${name}_labels.cmake)
    file(WRITE ${labels_file}
         "if(${name}_TESTS)\n"
         "  set_tests_properties(\${${name}_TESTS} PROPERTIES LABELS \"${ARG_LABELS}\"\n"
         "                      RUN_SERIAL ${serial})\n"
         "endif()\n")
    set_property(DIRECTORY APPEND PROPERTY TEST_INCLUDE_FILES ${labels_file})
  endif()
  foreach(label IN LISTS ARG_LABELS)
    set_property(GLOBAL APPEND PROPERTY ZEUS_TEST_TARGETS_${label} ${name})
  endforeach()
  _zeus_collect_labelled_tests_later()
  _zeus_add_without_shared_data_test(${name} "${ARG_SOURCES}" "${ARG_LABELS}")
endfunction()

# <name>_without_shared_data: a suite whose sources include support/shared_data.hpp (they read
# ../shared/data) runs its test suites (the TEST* groups of those files) once more with
# ZEUS_SHARED_DATA naming a folder that does not exist, as on a fresh clone without the data: a
# test that needs the data must skip, and this fails if one fails instead (docs/testing.md).
# Labelled as the suite, less `threaded` (it is not a ThreadSanitizer run), plus no-shared-data.
function(_zeus_add_without_shared_data_test name sources labels)
  set(groups)
  foreach(source IN LISTS sources)
    get_filename_component(path ${source} ABSOLUTE)
    # The path spelled out would escape this check: only shared_data_dir() may spell it.
    file(STRINGS ${path} spelled REGEX "\"shared\" */ *\"data\"")
    if(spelled)
      message(FATAL_ERROR "${path} spells the path of ../shared/data: use "
                          "zeus::testing::shared_data_dir() (tests/support/shared_data.hpp)")
    endif()
    file(STRINGS ${path} includes REGEX "^#include \"support/shared_data\\.hpp\"")
    if(includes)
      file(STRINGS ${path} tests REGEX "^TEST(_F|_P)?\\([A-Za-z0-9_]+,")
      foreach(test IN LISTS tests)
        string(REGEX REPLACE "^TEST(_F|_P)?\\(([A-Za-z0-9_]+),.*" "\\2.*" group "${test}")
        list(APPEND groups ${group})
      endforeach()
    endif()
  endforeach()
  if(NOT groups)
    return()
  endif()
  list(REMOVE_DUPLICATES groups)
  list(JOIN groups ":" filter)
  set(twin_labels ${labels} no-shared-data)
  list(REMOVE_ITEM twin_labels threaded)
  add_test(NAME ${name}_without_shared_data COMMAND ${name} --gtest_filter=${filter})
  set_tests_properties(${name}_without_shared_data PROPERTIES
    ENVIRONMENT "ZEUS_SHARED_DATA=${PROJECT_BINARY_DIR}/no-shared-data"
    LABELS "${twin_labels}")
endfunction()

# Tests registered with add_test under the name of the executable they run (server_postgres_test,
# bso_concurrency_test) get their labels from set_tests_properties, later in the same file: this
# reads them at the end of the directory, where get_test_property sees them.
function(_zeus_collect_labelled_tests_later)
  get_property(scheduled DIRECTORY PROPERTY ZEUS_LABEL_SCAN_SCHEDULED)
  if(NOT scheduled)
    set_property(DIRECTORY PROPERTY ZEUS_LABEL_SCAN_SCHEDULED ON)
    cmake_language(DEFER CALL _zeus_collect_labelled_tests)
  endif()
endfunction()

function(_zeus_collect_labelled_tests)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(test IN LISTS tests)
    get_test_property(${test} LABELS labels)
    if(labels AND TARGET ${test})
      foreach(label IN LISTS labels)
        set_property(GLOBAL APPEND PROPERTY ZEUS_TEST_TARGETS_${label} ${test})
      endforeach()
    endif()
  endforeach()
endfunction()

# zeus_add_label_target(<target> <label>)
# A target that builds every test executable with the CTest label <label> (zeus_add_gtest's, and
# add_test's named after their executable), with what they depend on. Call after the tests.
function(zeus_add_label_target target label)
  get_property(targets GLOBAL PROPERTY ZEUS_TEST_TARGETS_${label})
  list(REMOVE_DUPLICATES targets)
  add_custom_target(${target})
  if(targets)
    add_dependencies(${target} ${targets})
  endif()
  list(JOIN targets " " names)
  message(STATUS "zeus: ${target} builds the tests labelled `${label}`: ${names}")
endfunction()

# zeus_add_fuzzer(<name> SOURCES ... DEPS ...)
# A libFuzzer target (ZEUS_BUILD_FUZZERS, Clang): fuzz_<name>, run by scripts/fuzz.sh over
# fuzz/corpus/<name> and fuzz/regressions/<name>.
function(zeus_add_fuzzer name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  set(target fuzz_${name})
  add_executable(${target} ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE ${ARG_DEPS} zeus_warnings)
  target_link_options(${target} PRIVATE -fsanitize=fuzzer)
  set_property(GLOBAL APPEND PROPERTY ZEUS_FUZZERS ${target})
endfunction()
