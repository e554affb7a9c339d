# Writes roseinfer_version.h with the current git commit. Runs at every build (not only at
# configure), so a binary never reports the commit of an older configure; the header is rewritten
# only when its content changes, so nothing recompiles needlessly.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE ROSEINFER_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SOURCE_DIR}
                OUTPUT_VARIABLE ROSEINFER_GIT_DIRTY OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT ROSEINFER_GIT_COMMIT)
  set(ROSEINFER_GIT_COMMIT "unknown")
elseif(ROSEINFER_GIT_DIRTY)
  set(ROSEINFER_GIT_COMMIT "${ROSEINFER_GIT_COMMIT}-dirty")
endif()
configure_file(${SOURCE_DIR}/engine/common/version.h.in ${OUTPUT} @ONLY)
