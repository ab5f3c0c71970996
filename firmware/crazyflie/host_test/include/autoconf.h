/* STAND-IN for the firmware build's generated autoconf.h: the options this app's app-config sets. */
#ifndef AUTOCONF_H
#define AUTOCONF_H
#define CONFIG_CONTROLLER_OOT 1
#endif
