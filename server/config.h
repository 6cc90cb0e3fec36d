/*
 * config.h — rackpilotd's settings: compiled-in defaults, then an INI file (-c), then
 * command-line flags. `rackpilotd -n` prints the effective result in the file's format.
 */
#ifndef RP_CONFIG_H
#define RP_CONFIG_H

#include <stddef.h>
#include <stdio.h>

struct rp_config {
	char listen[96];
	char data_dir[512];
	char database[1024];  /* PostgreSQL connection string; "": SQLite in data_dir */
	char server_name[64]; /* owner of the job leases; "": the host name */
	unsigned threads;     /* 0: one per online CPU */
	size_t max_body;
	size_t max_import_body;
	size_t max_inventory; /* bytes of an agent inventory (registration included) */
	unsigned conn_timeout_s;
	unsigned conn_limit;
	unsigned max_streams_per_token; /* event streams one token may hold open */
	int access_log;
	char log_level[8];
	/* TLS on the API (docs/security.md). auto: on unless listen is a loopback address. */
	char tls[8];        /* auto | on | off */
	char tls_cert[512]; /* PEM; "": DATA_DIR/tls/cert.pem, made when missing */
	char tls_key[512];
	char secret_key[512]; /* "": DATA_DIR/secret.key */
	unsigned job_workers;
	unsigned db_connections;      /* the store's pool (rp_store_set_connections) */
	unsigned job_lease;           /* seconds; renewed every third of it */
	unsigned power_sync_interval; /* seconds; 0 disables */
	unsigned retention_days;      /* events, job logs, dead tokens; 0 keeps them */
	unsigned webhook_timeout;     /* seconds one webhook POST may take */
	unsigned webhook_max_age;     /* seconds a delivery is retried after its event */
	char webhook_ca_file[512];    /* "": the system's CAs */
	char webhook_proxy[256];      /* "": none */
	unsigned power_sync_concurrency;
	unsigned sensor_sync_interval;    /* seconds; 0 disables */
	unsigned sensor_history_hours;    /* 0 keeps them */
	unsigned sensor_history_max_rows; /* 0: no cap */
	unsigned rack_history_days;       /* 0 keeps them */
	unsigned drive_temp_warning;      /* Celsius; 0: the BMC's thresholds only */
	unsigned power_on_stagger;        /* power-ons in flight per rack; 0: no cap */
	unsigned power_on_stagger_ms;
	unsigned power_on_settle; /* seconds */
	unsigned bmc_fault_threshold;
	char console_log[8];           /* active | always | off: which consoles are logged */
	unsigned console_max_sessions; /* SOL sessions open at once */
	size_t console_log_bytes;      /* one node's console log, both files */
	unsigned console_idle_timeout; /* seconds; the writer is let go; 0: never */
	unsigned ssh_workers;          /* step plans running at once */
	unsigned agent_heartbeat;      /* seconds agents are told to heartbeat at */
	char agent_command[256];       /* how the agent is run on nodes */
	/* Network boot (docs/provisioning.md). */
	char image_dir[512];  /* "": DATA_DIR/images */
	char boot_listen[96]; /* plain-HTTP /boot/ listener; "": beside a TLS listen
	                         (port + 1), none otherwise; "off": none */
	char boot_url[256];   /* "": from the Host header of each boot request */
	char agent_url[256];  /* rackpilot.url= in scripts; "": the boot host, API port */
	unsigned boot_rate;   /* unauthenticated requests per second per address; 0: off */
	unsigned boot_burst;
	int boot_source_check; /* register only from the address that fetched the script */
	int discovery;         /* unknown MACs boot the discovery ramdisk */
	unsigned discovery_max_tokens;
	unsigned discovery_max_per_source; /* discovery slots one address may hold; 0: no limit */
	unsigned discovery_max_nodes; /* discovered nodes waiting for an operator; 0: no limit */
	unsigned bootstrap_ttl;       /* seconds a boot script's token lives */
	unsigned provision_timeout; /* seconds to wait for an agent in commission/deploy/release */
	unsigned deploy_boot_timeout;  /* seconds a deploy waits for the OS's first-boot report */
	unsigned long long max_upload; /* bytes of one image upload */
	char dnsmasq_hosts[512];       /* dhcp-hostsfile to keep current; "": none */
	char dnsmasq_pidfile[512];     /* dnsmasq to SIGHUP after a change; "": none */
};

/* Fill c with the compiled-in defaults: each setting's default from the table in config.c
 * (zero or "" where it has none). */
void rp_config_defaults(struct rp_config *c);

/* The settings table, row i (file order): returns the key, or NULL past the last row. *def is
 * the default as docs/rackpilotd.conf writes it ("" when unset), *help one line that the
 * doc's text about the key contains. All static strings. */
const char *rp_config_key(size_t i, const char **def, const char **help);

/* Apply one setting by its INI key. 0, or -1 with why set. */
int rp_config_set(struct rp_config *c, const char *key, const char *value, char *why,
                  size_t whylen);

/* Read an INI file ([server] section; # and ; comments). 0, or -1 with why naming the line. */
int rp_config_load(struct rp_config *c, const char *path, char *why, size_t whylen);

/* Check values that only make sense together (listen address shape...). 0 or -1 + why. */
int rp_config_check(const struct rp_config *c, char *why, size_t whylen);

/* Print c as an INI file. */
void rp_config_print(const struct rp_config *c, FILE *f);

#endif
