/* chat_page.h — the chat page served at GET / (src/server/chat.html, embedded at build
 * time by cmake/embed.cmake). */
#ifndef TOY_CHAT_PAGE_H
#define TOY_CHAT_PAGE_H

#include <stddef.h>

extern const char ty_chat_page[];
extern const size_t ty_chat_page_len;

#endif
