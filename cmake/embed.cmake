# Writes a C file holding a file's bytes: cmake -DIN=file -DOUT=file.c -DNAME=symbol -P embed.cmake
# (the chat page is plain HTML in the source tree, compiled into the binary).
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR size "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n  " bytes "${bytes}")
file(WRITE "${OUT}" "/* generated from ${IN} by cmake/embed.cmake */\n#include <stddef.h>\n"
  "const char ${NAME}[] = {\n  ${bytes}0x00};\nconst size_t ${NAME}_len = ${size};\n")
