# The plain message structs and their Cap'n Proto conversions are generated from the schema,
# messages/sloserve.capnp, by tools/gen_messages.py: at configure time, and again whenever the
# schema or the generator changes. They land in OUT_DIR/messages/.
function(sloserve_generate_messages root out_dir)
  find_program(SLOSERVE_GEN_PYTHON NAMES python3 REQUIRED)
  execute_process(COMMAND ${SLOSERVE_GEN_PYTHON} ${root}/tools/gen_messages.py ${root}/messages/sloserve.capnp
                          ${out_dir}/messages
                  RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(rc)
    message(FATAL_ERROR "tools/gen_messages.py failed: ${err}")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${root}/messages/sloserve.capnp
                                                                 ${root}/tools/gen_messages.py)
endfunction()
