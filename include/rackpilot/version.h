/* rackpilot/version.h — release and wire-protocol versions shared by server, agent and CLI. */
#ifndef RACKPILOT_VERSION_H
#define RACKPILOT_VERSION_H

#define RP_VERSION     "0.1.0"
#define RP_API_VERSION "v1"

#endif
