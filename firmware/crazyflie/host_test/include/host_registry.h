/* Host-test registry behind the param.h/log.h stand-ins: name, address and byte size of each variable. */
#ifndef HOST_REGISTRY_H
#define HOST_REGISTRY_H
typedef struct { const char *name; void *address; int size; } host_entry_t;
#endif
