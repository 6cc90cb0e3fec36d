# Generates a C file holding every recipes/*.sh as the recipe rackpilotd ships (JSON text, the
# body POST /v1/recipes would take), for server/store/recipes.c (rp_store_recipe_ship).
# Usage: cmake -DRECIPES_DIR=... -DOUT=... -P embed_recipes.cmake
#
# A script's header is its first lines of "# key: value" comments (after #!/bin/sh; the first
# other line ends it, and no header line may hold a ';'):
#   # recipe: NAME                       1-64 of a-z 0-9 -, the file being NAME.sh
#   # description: TEXT                  one line
#   # param: ARG [required] [default=VALUE] [(description)]   any number
#   # timeout_s: N                       the script's step timeout (default 3600)
#   # steps: [JSON]                      optional: the plan, when it is more than the script
# Without "# steps:" the recipe is one shell step, id NAME, command the script's text, env
# {RP_<ARG>: "${ARG}"} for every param (arguments reach the script through its environment,
# never pasted into its text). In a "# steps:" plan, "@script" inside a string becomes the
# script's text, the value "@env" that env object and @timeout_s the header's timeout.
# A script may not contain "${ARG}" for its own params: the server would replace it by the
# argument's value, textually, inside the shell text. The line
# '. "${0%/*}/lib/result.sh"' is replaced by that file's text (the shared result helpers).
file(GLOB files RELATIVE "${RECIPES_DIR}" "${RECIPES_DIR}/*.sh")
list(SORT files)
file(READ "${RECIPES_DIR}/lib/result.sh" result_lib)
# From its "# ---- result helpers" line: its header speaks of the tree, not of the node.
string(FIND "${result_lib}" "# ---- result helpers" at)
if(at LESS 0)
  message(FATAL_ERROR "recipes/lib/result.sh: no '# ---- result helpers' line")
endif()
string(SUBSTRING "${result_lib}" ${at} -1 result_lib)

# s as a JSON string literal (quotes included). Another control character than newline and
# tab stays raw, and the JSON check of the whole recipe below refuses it.
function(json_quote s outvar)
  string(REPLACE "\\" "\\\\" s "${s}")
  string(REPLACE "\"" "\\\"" s "${s}")
  string(REPLACE "\n" "\\n" s "${s}")
  string(REPLACE "\t" "\\t" s "${s}")
  set(${outvar} "\"${s}\"" PARENT_SCOPE)
endfunction()

set(body "/* Generated from recipes/ by cmake/embed_recipes.cmake. Do not edit. */\n")
string(APPEND body "#include \"store/shipped.h\"\n\nconst struct rp_shipped_recipe rp_shipped_recipes[] = {\n")
set(count 0)
foreach(f ${files})
  set(ctx "recipes/${f}")
  file(READ "${RECIPES_DIR}/${f}" text)
  if(NOT text MATCHES "^#!/bin/sh\n")
    message(FATAL_ERROR "${ctx}: the first line is #!/bin/sh")
  endif()
  # The header: the "# key: value" lines after the first, up to the first other line.
  string(REGEX MATCH "^#!/bin/sh\n(# [a-z_]+: [^\n]*\n)*" header "${text}")
  if(header MATCHES ";")
    message(FATAL_ERROR "${ctx}: no ';' in the header, please (CMake lists split on it)")
  endif()
  if(NOT header MATCHES "\n# recipe: ([a-z0-9-]+)\n")
    message(FATAL_ERROR "${ctx}: no '# recipe: NAME' line")
  endif()
  set(name "${CMAKE_MATCH_1}")
  # The result helpers every recipe shares (recipes/lib/result.sh) go inline: a node runs one
  # script, with nothing beside it to source.
  string(REPLACE ". \"\${0%/*}/lib/result.sh\"\n" "${result_lib}" text "${text}")
  if(NOT f STREQUAL "${name}.sh")
    message(FATAL_ERROR "${ctx}: recipe ${name} belongs in ${name}.sh")
  endif()
  set(description "")
  if(header MATCHES "\n# description: ([^\n]*)\n")
    set(description "${CMAKE_MATCH_1}")
  endif()
  set(timeout 3600)
  if(header MATCHES "\n# timeout_s: ([0-9]+)\n")
    set(timeout "${CMAKE_MATCH_1}")
  endif()
  set(steps "[{\"id\": \"${name}\", \"type\": \"shell\", \"command\": \"@script\", \"env\": \"@env\", \"timeout_s\": @timeout_s}]")
  if(header MATCHES "\n# steps: ([^\n]*)\n")
    set(steps "${CMAKE_MATCH_1}")
    # The plan is the build's, not the script's: it stays out of the text the node runs
    # (its ${ARG} placeholders would be filled in there too).
    string(REGEX REPLACE "\n# steps: [^\n]*\n" "\n" text "${text}")
  endif()

  string(REGEX MATCHALL "\n# param: [^\n]*" plines "${header}")
  set(params "")
  set(env "")
  foreach(pl ${plines})
    string(REGEX REPLACE "^\n# param: " "" pl "${pl}")
    if(NOT pl MATCHES "^([a-z_][a-z0-9_]*)( +required)?( +default=([^ ]*))?( +(.*))?$")
      message(FATAL_ERROR "${ctx}: '# param: ${pl}': ARG [required] [default=VALUE] [(description)]")
    endif()
    set(arg "${CMAKE_MATCH_1}")
    set(req "${CMAKE_MATCH_2}")
    set(hasdef "${CMAKE_MATCH_3}")
    set(def "${CMAKE_MATCH_4}")
    set(pdesc "${CMAKE_MATCH_6}")
    string(REGEX REPLACE "^\\((.*)\\)$" "\\1" pdesc "${pdesc}")
    string(FIND "${text}" "\${${arg}}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "${ctx}: the script contains \${${arg}}, which the server would replace by the argument (use \$RP_ARG)")
    endif()
    set(p "")
    if(req)
      string(APPEND p "\"required\": true")
    else()
      json_quote("${def}" q)
      string(APPEND p "\"required\": false, \"default\": ${q}")
    endif()
    if(NOT pdesc STREQUAL "")
      json_quote("${pdesc}" q)
      string(APPEND p ", \"description\": ${q}")
    endif()
    if(NOT params STREQUAL "")
      string(APPEND params ", ")
      string(APPEND env ", ")
    endif()
    string(APPEND params "\"${arg}\": {${p}}")
    string(TOUPPER "${arg}" up)
    string(APPEND env "\"RP_${up}\": \"\${${arg}}\"")
  endforeach()

  json_quote("${text}" qscript)
  # The quotes around "@script" are the string's own: splice the escaped text inside them.
  string(REGEX REPLACE "^\"(.*)\"$" "\\1" qscript_inner "${qscript}")
  string(REPLACE "\"@env\"" "{${env}}" steps "${steps}")
  string(REPLACE "@timeout_s" "${timeout}" steps "${steps}")
  string(REPLACE "@script" "${qscript_inner}" steps "${steps}")
  json_quote("${name}" qname)
  json_quote("${description}" qdesc)
  set(recipe "{\"name\": ${qname}, \"description\": ${qdesc}, \"params\": {${params}}, \"steps\": ${steps}}")
  string(JSON kind ERROR_VARIABLE err TYPE "${recipe}" steps)
  if(err OR NOT kind STREQUAL "ARRAY")
    message(FATAL_ERROR "${ctx}: the recipe is not valid JSON with a steps array: ${err}")
  endif()

  string(HEX "${recipe}" hex)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" esc "${hex}")
  # Break the literal every 64 bytes; adjacent literals concatenate.
  string(REGEX REPLACE "((\\\\x[0-9a-f][0-9a-f]){64})" "\\1\"\n\t\"" esc "${esc}")
  string(APPEND body "\t{\"${name}\",\n\t\"${esc}\"},\n")
  math(EXPR count "${count} + 1")
endforeach()
if(count EQUAL 0)
  message(FATAL_ERROR "no recipes in ${RECIPES_DIR}")
endif()
string(APPEND body "};\nconst size_t rp_shipped_recipe_count = ${count};\n")
file(WRITE "${OUT}.tmp" "${body}")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUT}.tmp" "${OUT}")
file(REMOVE "${OUT}.tmp")
