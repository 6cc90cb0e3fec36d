#!/usr/bin/env python3
"""Stateful Redfish mock BMC for Rackpilot's integration tests (Python 3 standard library only).

One process serves --count independent BMCs, BMC i on port --port-base + i.  All BMCs share one
immutable resource tree (the built-in 8-GPU server below, or a DMTF mockup folder given with
--tree); each BMC keeps only its own small state (power, boot override, BIOS, firmware, tasks,
sessions, counters) and renders the stateful resources from it on every GET.  --static serves a
DMTF tree as-is instead.  Behaviour follows /work/shared/redfish-mockups/README.md §4; the test
hooks live under /__mock/ on every port.  See README.md next to this file.
"""

import argparse
import base64
import copy
import json
import os
import random
import re
import resource
import secrets
import selectors
import signal
import socket
import socketserver
import ssl
import sys
import threading
import time
import traceback
import uuid
import zlib
from datetime import datetime, timedelta, timezone
from email.utils import formatdate
from email import policy
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

ROOT = "/redfish/v1"
PUBLIC = {"/redfish", ROOT, ROOT + "/odata", ROOT + "/$metadata"}
BOOT_KEYS = ("BootSourceOverrideTarget", "BootSourceOverrideEnabled", "BootSourceOverrideMode")
TERMINAL = {"Completed", "Exception", "Killed", "Cancelled"}

# Knobs settable with POST /__mock/config; the type of each default is the accepted type.
DEFAULTS = {
    "power_delay_s": 0.2,          # seconds spent in PoweringOn / PoweringOff
    "ignore_acpi": False,          # the OS ignores GracefulShutdown / GracefulRestart
    "conflict_when_same": False,   # 409 for On when On, ForceOff/GracefulShutdown when Off
    "quirk_legacy": False,         # Supermicro: a Boot PATCH silently stores Mode=Legacy
    "require_if_match": False,     # 428 for a PATCH without If-Match
    "basic_auth": True,
    "sessions": True,              # False: POST to Sessions answers 405
    "session_expire_after": 0,     # a session dies after this many requests (0 = never)
    "session_limit": 16,           # 503 SessionLimitExceeded beyond it (0 = no limit)
    "fail_next_503": 0,            # the next N requests answer 503 + Retry-After
    "fail_sensor_503": 0,          # the next N GETs of sensor resources answer 503 + Retry-After
    "fail_next_412": 0,            # the next N requests with If-Match answer 412, as if someone
                                   # changed the resource between the client's GET and its write
    "bmc_reboot_requests": 3,      # 503s after a successful BMC firmware update
    "delay_ms": 0,                 # latency added to every Redfish request
    "max_image_bytes": 16 << 20,   # UpdateService.MaxImageSizeBytes
    "bios_ignore": [],             # BIOS attributes accepted in Bios/Settings but dropped at the boot
    "log_services": True,          # False: the System and Manager have no LogServices (404)
    "log_page_size": 50,           # log entries per page of an Entries collection (0 = one page)
    "log_expand": True,            # Entries pages carry whole LogEntry bodies; False: links only
    "error_text": "",              # when set, every error answer carries this Message (a hostile BMC
                                   # may put anything there, the client's password included)
    "link_origins": {},            # {link kind: "http://host:port"}: that link becomes an absolute URL
                                   # on that origin (kinds: LINK_KINDS), as a spoofed BMC would name it
    # Sensors and power limits (the system's chassis and drives).
    "sensor_shapes": "both",       # which sensor resources are offered: SHAPES
    "expand_query": "full",        # $expand: full (advertised, honoured), ignored (advertised, ignored, as
                                   # the DMTF trees served as-is), none (not advertised; a $expand gets 501),
                                   # refused (advertised, but a $expand gets 400)
    "extra_sensors": 0,            # the main chassis' Sensors collection lists this many more temperatures
    "extra_chassis": 0,            # the system's Links.Chassis names this many more chassis (Chassis/Extra<n>)
    "chassis_padding_kb": 0,       # each extra chassis carries Oem.Padding: this many KiB of {} elements
    "broken_paths": {},            # {path prefix: BROKEN kind}: authenticated GETs at or under it answer so
    "limit_exceptions": [],        # PowerLimit.LimitException@Redfish.AllowableValues ([]: none given, any taken)
    # Fault injection (bad days of real BMCs). The control API /__mock/* is never faulted.
    "fault_seed": 0,               # seeds the fault draws (per BMC: seed and index), set to replay a run
    "fail_rate_503": 0.0,          # this fraction of Redfish requests answers 503 + Retry-After
    "fail_rate_429": 0.0,          # this fraction answers 429 + Retry-After
    "retry_after": 1,              # seconds in the Retry-After of every 503/429 the mock sends
    "retry_after_date": False,     # Retry-After as an HTTP-date (the BMC's Date + retry_after)
    "drop_rate": 0.0,              # this fraction of requests: the connection closes, no answer, no effect
    "lose_next_answers": 0,        # the next N actions (what `actions` lists) take effect, then the
                                   # connection closes without an answer (a reply lost after the BMC acted)
    "slow_next_answers": 0,        # the next N actions (the same set) take effect at once, and only their
    "slow_answer_s": 5.0,          # answer is held back this long (a BMC that acted but answers slowly)
    "drop_sessions": False,        # true: every session is invalidated now (reads back false)
    "drop_sessions_after": 0,      # every session is invalidated once, N Redfish requests from now
    "drop_sessions_rate": 0.0,     # before each request, every session is invalidated at this rate
    "unreachable_s": 0.0,          # the BMC is unreachable for this many seconds from now (0: back now)
    "unreachable_mode": "refuse",  # refuse: the port stops listening; drop: connections close unanswered
    "reboot_during_update_s": 0.0, # > 0: the first poll of an update task reboots the BMC: unreachable this
                                   # long, then back with the task Completed, new version, no sessions
    "clock_skew_s": 0.0,           # the BMC's clock (task StartTime/EndTime, Date header) is off by this
    # Accounts, the identify LED and the manager's own reset.
    "password_min": 8,             # AccountService.MinPasswordLength: a shorter new Password gets 400
    "password_max": 20,            # AccountService.MaxPasswordLength: a longer new Password gets 400
    "password_charset": "any",     # any, or alnum: a new Password of anything but ASCII letters and digits gets 400
    "password_change_required": False,  # DSP0266 "Password change required": 403 for everything but changing it
                                   # (cleared by a successful password PATCH)
    "drop_sessions_on_password": False,  # a password change ends every session of the account (OpenBMC)
    "indicator": "location",       # identify LED: location (LocationIndicatorActive + IndicatorLED), legacy
                                   # (IndicatorLED only, pre-2020 BMCs), none
    "bmc_reset_s": 3.0,            # Manager.Reset: the BMC is unreachable this long after its 204
    "user": "admin",
    "password": "secret",
}

# Message registries the mock answers with (ids per DSP0266: Registry.Major.Minor.Key).
REGISTRY = {"Base": "Base.1.22", "Update": "Update.1.3", "TaskEvent": "TaskEvent.1.0"}
MESSAGES = {  # key: (registry, severity, text with %1.. arguments, resolution)
    "Success": ("Base", "OK", "The request succeeded.", "None."),
    "GeneralError": ("Base", "Critical", "Several errors occurred; see @Message.ExtendedInfo.",
                     "Correct each reported error."),
    "InternalError": ("Base", "Critical", "The mock BMC failed internally.", "See the mock's stderr."),
    "NoValidSession": ("Base", "Critical", "No valid session or credentials were supplied.",
                       "Log in with a session, or send valid Basic credentials."),
    "SessionLimitExceeded": ("Base", "Critical", "The limit of open sessions has been reached.",
                             "Log out an existing session and retry."),
    "PreconditionFailed": ("Base", "Critical", "The If-Match ETag does not match the resource's current ETag.",
                           "GET the resource again and retry with its new ETag."),
    "PreconditionRequired": ("Base", "Critical", "Changing this resource requires an If-Match header.",
                             "GET the resource and send its ETag in If-Match."),
    "ResourceNotFound": ("Base", "Critical", "There is no %1 named '%2'.", "Check the URI."),
    "OperationNotAllowed": ("Base", "Critical", "This HTTP method is not supported on this URI.",
                            "Use a method listed in the Allow header."),
    "MalformedJSON": ("Base", "Critical", "The request body is not valid JSON.", "Send a valid JSON body."),
    "UnrecognizedRequestBody": ("Base", "Warning", "The request body is not a JSON object.",
                                "Send a JSON object."),
    "HeaderInvalid": ("Base", "Critical", "The request header '%1' is not acceptable.",
                      "Send Content-Type: application/json (multipart/form-data for image pushes)."),
    "NoOperation": ("Base", "Warning", "The request body contains nothing to change.",
                    "Include the properties to change."),
    "PropertyUnknown": ("Base", "Warning", "%1 is not a property of this resource.", "Remove it."),
    "PropertyNotWritable": ("Base", "Warning", "%1 is read-only.", "Remove it."),
    "PropertyMissing": ("Base", "Warning", "%1 is required in this request.", "Add it."),
    "PropertyValueNotInList": ("Base", "Warning", "'%1' is not an allowed value of %2.",
                               "Use a value the resource or its registry allows."),
    "PropertyValueTypeError": ("Base", "Warning", "'%1' has the wrong type for %2.", "Send the right JSON type."),
    "PropertyValueOutOfRange": ("Base", "Warning", "'%1' is out of the allowed range of %2.",
                                "Respect the bounds given in the registry."),
    "ActionParameterMissing": ("Base", "Critical", "Action %1 needs the parameter %2.", "Add the parameter."),
    "ActionParameterValueNotInList": ("Base", "Warning", "'%1' is not an allowed value of parameter %2 of %3.",
                                      "Use an allowed value."),
    "ActionParameterValueTypeError": ("Base", "Warning", "'%1' has the wrong type for parameter %2 of %3.",
                                      "Send the right JSON type."),
    "ActionParameterValueFormatError": ("Base", "Warning", "'%1' is not a valid format for parameter %2 of %3.",
                                        "Send a URI ending in an image file name."),
    "ActionParameterValueConflict": ("Base", "Warning", "%1 '%2' conflicts with the current state.",
                                     "Read the current state first."),
    "MissingOrMalformedPart": ("Base", "Critical", "A multipart part is missing or malformed.",
                               "Send an UpdateParameters (JSON) and an UpdateFile part."),
    "PayloadTooLarge": ("Base", "Critical", "The payload exceeds MaxImageSizeBytes.", "Send a smaller image."),
    "ServiceTemporarilyUnavailable": ("Base", "Critical", "The service is unavailable; retry in %1 seconds.",
                                      "Wait and retry."),
    "ResetRequired": ("Base", "Warning", "A reset via %1 (ResetType %2) is needed to apply the change.",
                      "Reset the component."),
    "UpdateInProgress": ("Update", "OK", "Another update is in progress.", "Wait for its task to finish."),
    "TransferringToComponent": ("Update", "OK", "Image '%1' is being sent to %2.", "None."),
    "VerifyingAtComponent": ("Update", "OK", "Image '%1' is being verified at %2.", "None."),
    "ApplyingOnComponent": ("Update", "OK", "Image '%1' is being applied to %2.", "None."),
    "UpdateSuccessful": ("Update", "OK", "%1 was updated with image '%2'.", "None."),
    "AwaitToActivate": ("Update", "OK", "Image '%1' on %2 waits for a reset to be activated.",
                        "Reset the system."),
    "VerificationFailed": ("Update", "Critical", "Image '%1' failed verification at %2.",
                           "Use a valid image."),
    "TaskStarted": ("TaskEvent", "OK", "Task %1 started.", "None."),
    "TaskCompletedOK": ("TaskEvent", "OK", "Task %1 completed.", "None."),
    "TaskAborted": ("TaskEvent", "Critical", "Task %1 ended with errors.", "See the other messages."),
    "QueryParameterValueTypeError": ("Base", "Warning", "The value '%1' for the query parameter %2 is not valid.",
                                     "Send a non-negative integer."),
    "QueryParameterValueFormatError": ("Base", "Warning", "The value '%1' for the parameter %2 has the wrong format.",
                                       "Send $expand=*, . or ~, optionally with ($levels=1..6)."),
    "QueryNotSupported": ("Base", "Warning", "Querying is not supported by the implementation.",
                          "Remove the query parameters and resubmit the request."),
    "PropertyValueFormatError": ("Base", "Warning", "The value '%1' for the property %2 is not a format that the "
                                 "property can accept.", "Correct the value and resubmit the request."),
    "PropertyValueIncorrect": ("Base", "Warning", "The property %1 with the requested value of '%2' could not be "
                               "written because the value does not meet the constraints of the implementation.",
                               "Send a value that meets the constraints."),
    "PropertyValueConflict": ("Base", "Warning", "The property %1 could not be written because its value would "
                              "conflict with the value of the %2 property.", "Send values that agree."),
    "PasswordChangeRequired": ("Base", "Critical", "The password provided for this account must be changed before "
                               "access is granted. PATCH the Password property for this account located at the "
                               "target URI '%1' to complete this process.",
                               "Change the password for this account using a PATCH to the Password property at "
                               "the URI provided."),
}

# Links that link_origins can turn into absolute URLs: the service root's Links.Sessions and the
# SessionService's Sessions; a login's Location; UpdateService.MultipartHttpPushUri; an update's task
# monitor (its 202 Location and the Task's TaskMonitor); the ComputerSystem.Reset target; the BIOS
# registry file's Location[].Uri; the system's Links.Chassis (chassis); a chassis' links to its sensor
# resources and theirs to their parts (sensor_link: Sensors, EnvironmentMetrics, PowerSubsystem,
# ThermalSubsystem, Power, Thermal, ThermalMetrics, Fans, PowerSupplies, Metrics, a drive's
# EnvironmentMetrics); the members of the Sensors, Fans and PowerSupplies collections and a chassis'
# Links.Drives (sensor_member).
LINK_KINDS = ("sessions", "session_location", "push_uri", "task_monitor", "reset_target", "registry",
              "chassis", "sensor_link", "sensor_member")

LOG_SEVERITIES = ("OK", "Warning", "Critical")
RESET_TYPES = ["On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "ForceOn",
               "PushPowerButton", "PowerCycle", "Nmi"]
MANAGER_RESET_TYPES = ["GracefulRestart", "ForceRestart"]
LED_STATES = ("Lit", "Blinking", "Off")        # the deprecated IndicatorLED; LocationIndicatorActive = not Off
LED_KEYS = ("IndicatorLED", "LocationIndicatorActive")
INDICATOR_MODES = ("location", "legacy", "none")
MASK = "******"                                # what error messages show for a password
PROTOCOLS = ["CIFS", "FTP", "SFTP", "HTTP", "HTTPS", "NSF", "SCP", "TFTP", "OEM", "NFS"]


def now():
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def ref(uri):
    return {"@odata.id": uri}


def show(value):
    return value if isinstance(value, str) else json.dumps(value)


def message(key, *args, related=None):
    registry, severity, text, resolution = MESSAGES[key]
    for n, arg in enumerate(args, 1):
        text = text.replace(f"%{n}", str(arg))
    msg = {"@odata.type": "#Message.v1_2_0.Message", "MessageId": f"{REGISTRY[registry]}.{key}",
           "Message": text, "MessageArgs": [str(a) for a in args], "Severity": severity,
           "MessageSeverity": severity, "Resolution": resolution}
    if related:
        msg["RelatedProperties"] = [related]
    return msg


class Drop(Exception):
    """Close the connection without an answer."""


class Hold(Exception):
    """Send this response, but only after holding it back `seconds` (outside the BMC's lock)."""

    def __init__(self, response, seconds):
        super().__init__(seconds)
        self.response, self.seconds = response, seconds


class HttpError(Exception):
    """A Redfish error response: status, ExtendedInfo messages and extra headers."""

    def __init__(self, status, messages, headers=None):
        super().__init__(status)
        self.status = status
        self.messages = messages if isinstance(messages, list) else [messages]
        self.headers = headers or {}

    def response(self):
        head = self.messages[0] if len(self.messages) == 1 else message("GeneralError")
        return self.status, self.headers, {"error": {"code": head["MessageId"], "message": head["Message"],
                                                     "@Message.ExtendedInfo": self.messages}}


def not_found(path):
    return HttpError(404, message("ResourceNotFound", "resource", path))


def image_stem(name):
    """'bmc_2.1.0.bin' -> 'bmc_2.1.0' (drops extensions that start with a letter)."""
    return re.sub(r"(\.[A-Za-z][A-Za-z0-9]*)+$", "", name)


def image_version(name):
    """The version an image installs: its stem after the last '_' (bmc_2.1.0.bin -> 2.1.0)."""
    return image_stem(name).rpartition("_")[2]


def parse_json(body):
    try:
        data = json.loads(body)
    except ValueError:
        raise HttpError(400, message("MalformedJSON")) from None
    if not isinstance(data, dict):
        raise HttpError(400, message("UnrecognizedRequestBody"))
    return data


def parse_multipart(content_type, body):
    """{part name: (filename or None, payload bytes)} of a multipart/form-data body."""
    msg = BytesParser(policy=policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + body)
    if not msg.is_multipart():
        return {}
    return {part.get_param("name", header="content-disposition"): (part.get_filename(),
                                                                   part.get_payload(decode=True))
            for part in msg.iter_parts()}


# ---------------------------------------------------------------------------------------------
# Resource trees
# ---------------------------------------------------------------------------------------------

def load_tree(directory, raw=False):
    """Map a DMTF mockup folder to {URI: document} as the mockups README §0 describes: X/Y/index.json
    is /redfish/v1/X/Y, other *.json files keep their name, $metadata/index.xml stays bytes."""
    docs = {}
    for dirpath, _, files in os.walk(directory):
        rel = os.path.relpath(dirpath, directory).replace(os.sep, "/")
        uri = ROOT if rel == "." else f"{ROOT}/{rel}"
        for name in files:
            if name != "index.xml" and not name.endswith(".json"):
                continue
            with open(os.path.join(dirpath, name), "rb") as f:
                data = f.read()
            key = uri if name in ("index.json", "index.xml") else f"{uri}/{name}"
            docs[key] = data if raw or name == "index.xml" else json.loads(data)
    if ROOT not in docs:
        sys.exit(f"mock_bmc: {directory} has no top-level index.json; not a Redfish mockup tree")
    return docs


METADATA = b"""<?xml version="1.0" encoding="UTF-8"?>
<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">
  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/ServiceRoot_v1.xml">
    <edmx:Include Namespace="ServiceRoot"/>
    <edmx:Include Namespace="ServiceRoot.v1_17_0"/>
  </edmx:Reference>
  <edmx:DataServices>
    <Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="Service">
      <EntityContainer Name="Service" Extends="ServiceRoot.v1_17_0.ServiceContainer"/>
    </Schema>
  </edmx:DataServices>
</edmx:Edmx>
"""

# Built-in BIOS attributes: (name, type, default, enum values or bounds, read-only)
BIOS_ATTRIBUTES = [
    ("Above4GDecoding", "Enumeration", "Enabled", ["Enabled", "Disabled"], False),
    ("SriovSupport", "Enumeration", "Disabled", ["Enabled", "Disabled"], False),
    ("NumaNodesPerSocket", "Enumeration", "NPS1", ["NPS1", "NPS2", "NPS4"], False),
    ("PowerProfile", "Enumeration", "Balanced", ["Performance", "Balanced", "PowerSaver"], False),
    ("BootMode", "Enumeration", "Uefi", ["Uefi", "Legacy"], False),
    ("ProcCoreDisable", "Integer", 0, {"LowerBound": 0, "UpperBound": 64}, False),
    ("AdminPhone", "String", "", {"MinLength": 0, "MaxLength": 32}, False),
    ("SysMemSize", "String", "2048 GB", {}, True),
]


# The built-in tree's sensors and the chassis that carry them. Every shape (the Sensors collection,
# EnvironmentMetrics + ThermalSubsystem + PowerSubsystem, the deprecated Power + Thermal, the drives'
# EnvironmentMetrics) shows the same per-BMC values, which POST /__mock/sensor changes.
BUILTIN_SYSTEM = f"{ROOT}/Systems/System.Embedded.1"
BUILTIN_CHASSIS = {"main": f"{ROOT}/Chassis/Chassis.Embedded.1", "gpu": f"{ROOT}/Chassis/GPU_Baseboard"}
BUILTIN_DRIVES = [f"{BUILTIN_SYSTEM}/Storage/NVMe/Drives/NVMe{n}" for n in range(4)]
THRESHOLDS = ("LowerCritical", "LowerCaution", "UpperCaution", "UpperCritical")
DEPRECATED_THRESHOLDS = dict(zip(THRESHOLDS, ("LowerThresholdCritical", "LowerThresholdNonCritical",
                                              "UpperThresholdNonCritical", "UpperThresholdCritical")))
# (Id, Name, chassis, ReadingType, ReadingUnits, PhysicalContext, reading, thresholds in THRESHOLDS order)
SENSOR_TABLE = [
    ("Inlet_Temp", "Inlet Temp", "main", "Temperature", "Cel", "Intake", 24.0, (3, 5, 40, 45)),
    ("Exhaust_Temp", "Exhaust Temp", "main", "Temperature", "Cel", "Exhaust", 38.5, (None, None, 70, 75)),
    ("CPU0_Temp", "CPU0 Temp", "main", "Temperature", "Cel", "CPU", 52.0, (None, None, 90, 95)),
    ("CPU1_Temp", "CPU1 Temp", "main", "Temperature", "Cel", "CPU", 55.0, (None, None, 90, 95)),
    ("DIMM_A_Temp", "DIMM A Temp", "main", "Temperature", "Cel", "Memory", 41.0, (None, None, 85, 90)),
    ("DIMM_B_Temp", "DIMM B Temp", "main", "Temperature", "Cel", "Memory", 42.0, (None, None, 85, 90)),
    *[(f"NVMe{n}_Temp", f"NVMe{n} Temp", "main", "Temperature", "Cel", "StorageDevice", 35.0 + n,
       (None, None, 70, 75)) for n in range(4)],
    *[(f"Fan{n}", f"Fan{n}", "main", "Rotational", "RPM", "Fan", 9000 + 100 * n, (1000, 1500, None, None))
      for n in range(1, 7)],
    *[(f"PSU{n}_Input_Power", f"PSU{n} Input Power", "main", "Power", "W", "PowerSupply", 1500 + n,
       (None, None, 3000, 3300)) for n in range(1, 5)],
    ("Total_Power", "Total Power", "main", "Power", "W", "Chassis", 6200, (None, None, 10000, 10500)),
    ("P12V", "P12V", "main", "Voltage", "V", "SystemBoard", 12.1, (11.4, 11.6, 12.4, 12.6)),
    *[(f"GPU{n}_Temp", f"GPU{n} Temp", "gpu", "Temperature", "Cel", "GPU", 60.0 + n, (None, None, 85, 90))
      for n in range(8)],
    ("GPU_Board_Power", "GPU Board Power", "gpu", "Power", "W", "GPUSubsystem", 4200, (None, None, 5600, 6000)),
]
FAN_MAX_RPM = 16000     # SpeedPercent = SpeedRPM / this
# The chassis' links to sensor resources, by group; sensor_shapes names the groups a BMC offers.
SENSOR_LINKS = {"Sensors": "sensors", "EnvironmentMetrics": "subsystems", "PowerSubsystem": "subsystems",
                "ThermalSubsystem": "subsystems", "Power": "deprecated", "Thermal": "deprecated"}
SHAPES = {"modern": ("sensors", "subsystems"), "subsystems": ("subsystems",), "sensors": ("sensors",),
          "deprecated": ("deprecated",), "both": ("sensors", "subsystems", "deprecated"), "none": ()}
SENSOR_PARTS = ("ThermalMetrics", "Fans", "PowerSupplies", "Metrics", "EnvironmentMetrics")
CONTROL_MODES = ["Automatic", "Override", "Manual", "Disabled"]
POWER_LIMIT = {"set_point": None, "control_mode": "Disabled", "allowable_min": 2000, "allowable_max": 12000,
               "exception": "LogEventOnly"}
LIMIT_EXCEPTIONS = ["NoAction", "HardPowerOff", "LogEventOnly", "Oem"]
# broken_paths: what a GET answers there. garbage: 200 with a body that is no JSON; 500: InternalError;
# huge: the resource with every "Reading" written 1e400 (a number no double holds).
BROKEN = ("garbage", "500", "huge")
EXTRA_CHASSIS_MAX = 30
EXPAND = {"ExpandAll": True, "Levels": True, "MaxLevels": 6, "Links": True, "NoLinks": True}


def sensor_defaults():
    """{sensor Id: {name, reading, health, thresholds}}: the built-in sensors as a BMC starts."""
    return {sid: {"name": name, "reading": reading, "health": "OK",
                  "thresholds": {k: v for k, v in zip(THRESHOLDS, limits) if v is not None}}
            for sid, name, _, _, _, _, reading, limits in SENSOR_TABLE}


def sensor_tree(values, limit):
    """{URI: document} of the built-in tree's sensor resources, in every shape, showing `values`
    (sensor_defaults' form) and the power limit `limit` (POWER_LIMIT's form)."""
    docs = {}
    uri_of = {row[0]: f"{BUILTIN_CHASSIS[row[2]]}/Sensors/{row[0]}" for row in SENSOR_TABLE}

    def add(uri, odata_type, **props):
        docs[uri] = {"@odata.id": uri, "@odata.type": odata_type, **props}

    def reading(sid):
        return values[sid]["reading"]

    def status(sid):
        health = values[sid]["health"]
        return {"State": "Enabled", "Health": health} if health is not None else {"State": "Enabled"}

    def excerpt(sid, **extra):
        return {**extra, "Reading": reading(sid), "DataSourceUri": uri_of[sid]}

    def percent(sid):
        rpm = reading(sid)
        return round(rpm * 100 / FAN_MAX_RPM, 1) if isinstance(rpm, (int, float)) and not isinstance(rpm, bool) \
            else rpm

    def deprecated(uri, array, n, sid, name, **props):
        item = {"@odata.id": f"{uri}#/{array}/{n}", "MemberId": sid, "Name": name or values[sid]["name"], **props,
                "Status": status(sid)}
        item.update({DEPRECATED_THRESHOLDS[k]: v for k, v in values[sid]["thresholds"].items()})
        return item

    for key, uri in BUILTIN_CHASSIS.items():
        rows = [row for row in SENSOR_TABLE if row[2] == key]
        temps = [row for row in rows if row[3] == "Temperature"]
        fans = [row for row in rows if row[3] == "Rotational"]
        psus = [row for row in rows if row[5] == "PowerSupply"]
        total = next(row[0] for row in rows if row[3] == "Power" and row[5] in ("Chassis", "GPUSubsystem"))
        add(f"{uri}/Sensors", "#SensorCollection.SensorCollection", Name="Sensors",
            Members=[ref(uri_of[row[0]]) for row in rows], **{"Members@odata.count": len(rows)})
        for sid, _, _, kind, units, context, _, _ in rows:
            add(uri_of[sid], "#Sensor.v1_9_0.Sensor", Id=sid, Name=values[sid]["name"], ReadingType=kind,
                ReadingUnits=units,
                PhysicalContext=context, **({"PhysicalSubContext": "Input"} if context == "PowerSupply" else {}),
                Reading=reading(sid), Status=status(sid),
                Thresholds={k: {"Reading": v} for k, v in values[sid]["thresholds"].items()})
        env = {"PowerWatts": excerpt(total)}
        if key == "main":
            env["TemperatureCelsius"] = excerpt("Inlet_Temp")
            env["PowerLimitWatts"] = {"SetPoint": limit["set_point"], "ControlMode": limit["control_mode"],
                                      "ControlMode@Redfish.AllowableValues": CONTROL_MODES,
                                      "AllowableMin": limit["allowable_min"], "AllowableMax": limit["allowable_max"]}
        add(f"{uri}/EnvironmentMetrics", "#EnvironmentMetrics.v1_3_0.EnvironmentMetrics", Id="EnvironmentMetrics",
            Name="Chassis Environment Metrics", **env)
        thermal = f"{uri}/ThermalSubsystem"
        add(thermal, "#ThermalSubsystem.v1_3_0.ThermalSubsystem", Id="ThermalSubsystem", Name="Thermal Subsystem",
            Status={"State": "Enabled", "Health": "OK"}, ThermalMetrics=ref(f"{thermal}/ThermalMetrics"),
            **({"Fans": ref(f"{thermal}/Fans")} if fans else {}))
        metrics = {"TemperatureReadingsCelsius": [excerpt(sid, DeviceName=values[sid]["name"], PhysicalContext=context)
                                                  for sid, _, _, _, _, context, _, _ in temps]}
        if key == "main":
            metrics["TemperatureSummaryCelsius"] = {"Intake": excerpt("Inlet_Temp"), "Exhaust": excerpt("Exhaust_Temp")}
        add(f"{thermal}/ThermalMetrics", "#ThermalMetrics.v1_0_0.ThermalMetrics", Id="ThermalMetrics",
            Name="Chassis Thermal Metrics", **metrics)
        if fans:
            add(f"{thermal}/Fans", "#FanCollection.FanCollection", Name="Fans",
                Members=[ref(f"{thermal}/Fans/{row[0]}") for row in fans], **{"Members@odata.count": len(fans)})
            for sid, *_ in fans:
                add(f"{thermal}/Fans/{sid}", "#Fan.v1_3_0.Fan", Id=sid, Name=values[sid]["name"], Status=status(sid),
                    SpeedPercent=excerpt(sid, SpeedRPM=reading(sid)) | {"Reading": percent(sid)})
        if psus:
            power = f"{uri}/PowerSubsystem"
            labels = [sid.split("_")[0] for sid, *_ in psus]
            add(power, "#PowerSubsystem.v1_1_0.PowerSubsystem", Id="PowerSubsystem", Name="Power Subsystem",
                Status={"State": "Enabled", "Health": "OK"}, PowerSupplies=ref(f"{power}/PowerSupplies"))
            add(f"{power}/PowerSupplies", "#PowerSupplyCollection.PowerSupplyCollection", Name="Power Supplies",
                Members=[ref(f"{power}/PowerSupplies/{label}") for label in labels],
                **{"Members@odata.count": len(labels)})
            for label, (sid, *_) in zip(labels, psus):
                psu = f"{power}/PowerSupplies/{label}"
                add(psu, "#PowerSupply.v1_5_0.PowerSupply", Id=label, Name=label, Status=status(sid),
                    PowerCapacityWatts=3300, Metrics=ref(f"{psu}/Metrics"))
                add(f"{psu}/Metrics", "#PowerSupplyMetrics.v1_0_0.PowerSupplyMetrics", Id="Metrics",
                    Name=f"{label} Metrics", InputPowerWatts=excerpt(sid))
        add(f"{uri}/Thermal", "#Thermal.v1_7_0.Thermal", Id="Thermal", Name="Thermal",
            Temperatures=[deprecated(f"{uri}/Thermal", "Temperatures", n, sid, None, ReadingCelsius=reading(sid),
                                     PhysicalContext=context)
                          for n, (sid, _, _, _, _, context, _, _) in
                          enumerate(row for row in temps if row[5] != "StorageDevice")],
            Fans=[deprecated(f"{uri}/Thermal", "Fans", n, sid, None, Reading=reading(sid), ReadingUnits="RPM")
                  for n, (sid, *_) in enumerate(fans)])
        control = {"@odata.id": f"{uri}/Power#/PowerControl/0", "MemberId": "0",
                   "Name": "System Power Control" if key == "main" else "GPU Board Power Control",
                   "PowerConsumedWatts": reading(total), "Status": status(total)}
        if key == "main":
            control["PowerLimit"] = {"LimitInWatts": limit["set_point"] if limit["control_mode"] != "Disabled"
                                     else None, "LimitException": limit.get("exception", "LogEventOnly")}
        add(f"{uri}/Power", "#Power.v1_7_0.Power", Id="Power", Name="Power", PowerControl=[control],
            PowerSupplies=[deprecated(f"{uri}/Power", "PowerSupplies", n, sid, sid.split("_")[0],
                                      PowerInputWatts=reading(sid), PowerCapacityWatts=3300)
                           for n, (sid, *_) in enumerate(psus)],
            Voltages=[deprecated(f"{uri}/Power", "Voltages", n, sid, None, ReadingVolts=reading(sid))
                      for n, (sid, *_) in enumerate(row for row in rows if row[3] == "Voltage")])
    for n, drive in enumerate(BUILTIN_DRIVES):
        add(f"{drive}/EnvironmentMetrics", "#EnvironmentMetrics.v1_3_0.EnvironmentMetrics", Id="EnvironmentMetrics",
            Name=f"NVMe{n} Environment Metrics", TemperatureCelsius=excerpt(f"NVMe{n}_Temp"))
    return docs


def builtin_tree():
    """The default tree: a 2-socket, 8-GPU rack server, written for this mock."""
    system = BUILTIN_SYSTEM
    manager = f"{ROOT}/Managers/BMC.Embedded.1"
    chassis, gpu_board = BUILTIN_CHASSIS["main"], BUILTIN_CHASSIS["gpu"]
    bios, update = f"{system}/Bios", f"{ROOT}/UpdateService"
    inventory, registry_id = f"{update}/FirmwareInventory", "BiosAttributeRegistryGX8.v1_0_0"
    ok = {"State": "Enabled", "Health": "OK"}
    docs = {}

    def add(uri, odata_type, **props):
        docs[uri] = {"@odata.id": uri, "@odata.type": odata_type, **props}

    def collection(uri, odata_type, name, members):
        add(uri, odata_type, Name=name, Members=[ref(m) for m in members], **{"Members@odata.count": len(members)})

    add(ROOT, "#ServiceRoot.v1_17_0.ServiceRoot", Id="RootService", Name="Root Service", RedfishVersion="1.17.0",
        UUID="", Vendor="Mockwell", Product="GX8 GPU Server", Systems=ref(f"{ROOT}/Systems"),
        Chassis=ref(f"{ROOT}/Chassis"), Managers=ref(f"{ROOT}/Managers"), Tasks=ref(f"{ROOT}/TaskService"),
        SessionService=ref(f"{ROOT}/SessionService"), AccountService=ref(f"{ROOT}/AccountService"),
        Registries=ref(f"{ROOT}/Registries"), UpdateService=ref(update),
        Links={"Sessions": ref(f"{ROOT}/SessionService/Sessions")},
        ProtocolFeaturesSupported={"ExpandQuery": dict(EXPAND), "SelectQuery": False, "FilterQuery": False,
                                   "OnlyMemberQuery": True, "ExcerptQuery": True})
    docs[ROOT + "/odata"] = {"@odata.context": f"{ROOT}/$metadata", "value": [
        {"name": n, "kind": "Singleton", "url": f"{ROOT}/{n}"}
        for n in ("Systems", "Chassis", "Managers", "TaskService", "SessionService", "AccountService",
                  "Registries", "UpdateService")]}
    docs[ROOT + "/$metadata"] = METADATA
    add(f"{ROOT}/SessionService", "#SessionService.v1_1_8.SessionService", Id="SessionService",
        Name="Session Service", ServiceEnabled=True, SessionTimeout=1800,
        Sessions=ref(f"{ROOT}/SessionService/Sessions"))
    collection(f"{ROOT}/SessionService/Sessions", "#SessionCollection.SessionCollection", "Sessions", [])
    accounts = f"{ROOT}/AccountService/Accounts"
    add(f"{ROOT}/AccountService", "#AccountService.v1_13_0.AccountService", Id="AccountService",
        Name="Account Service", ServiceEnabled=True, MinPasswordLength=8, MaxPasswordLength=20,
        AccountLockoutThreshold=0, Accounts=ref(accounts), Roles=ref(f"{ROOT}/AccountService/Roles"))
    collection(accounts, "#ManagerAccountCollection.ManagerAccountCollection", "Accounts", [f"{accounts}/1"])
    add(f"{accounts}/1", "#ManagerAccount.v1_10_0.ManagerAccount", Id="1", Name="User Account", UserName="",
        Password=None, RoleId="Administrator", Enabled=True, Locked=False, PasswordChangeRequired=False,
        AccountTypes=["Redfish"], Links={"Role": ref(f"{ROOT}/AccountService/Roles/Administrator")})
    collection(f"{ROOT}/AccountService/Roles", "#RoleCollection.RoleCollection", "Roles",
               [f"{ROOT}/AccountService/Roles/Administrator"])
    add(f"{ROOT}/AccountService/Roles/Administrator", "#Role.v1_3_1.Role", Id="Administrator", Name="Administrator",
        RoleId="Administrator", IsPredefined=True,
        AssignedPrivileges=["Login", "ConfigureManager", "ConfigureUsers", "ConfigureSelf", "ConfigureComponents"])

    collection(f"{ROOT}/Systems", "#ComputerSystemCollection.ComputerSystemCollection", "Systems", [system])
    cpus = [f"{system}/Processors/CPU{n}" for n in range(2)]
    gpus = [f"{system}/Processors/GPU{n}" for n in range(8)]
    nics = [f"{system}/EthernetInterfaces/NIC.Slot.1-{n}" for n in (1, 2)]
    add(system, "#ComputerSystem.v1_20_0.ComputerSystem", Id="System.Embedded.1", Name="System",
        SystemType="Physical", Manufacturer="Mockwell", Model="GX8-H100", SKU="GX8-8H100-2048",
        SerialNumber="", UUID="", HostName="", PowerState="Off", Status=ok, BiosVersion="", IndicatorLED="Off",
        LocationIndicatorActive=False,
        Boot={"BootSourceOverrideEnabled": "Disabled", "BootSourceOverrideTarget": "None",
              "BootSourceOverrideMode": "UEFI",
              "BootSourceOverrideTarget@Redfish.AllowableValues":
                  ["None", "Pxe", "Hdd", "Cd", "Usb", "BiosSetup", "UefiHttp"],
              "BootSourceOverrideEnabled@Redfish.AllowableValues": ["Disabled", "Once", "Continuous"],
              "BootSourceOverrideMode@Redfish.AllowableValues": ["UEFI", "Legacy"]},
        BootProgress={"LastState": "None"},
        ProcessorSummary={"Count": 2, "CoreCount": 128, "LogicalProcessorCount": 256,
                          "Model": "AMD EPYC 9554 64-Core Processor", "Status": ok},
        MemorySummary={"TotalSystemMemoryGiB": 2048, "Status": ok},
        Bios=ref(bios), Processors=ref(f"{system}/Processors"),
        EthernetInterfaces=ref(f"{system}/EthernetInterfaces"), LogServices=ref(f"{system}/LogServices"),
        Storage=ref(f"{system}/Storage"),
        Links={"Chassis": [ref(chassis), ref(gpu_board)], "ManagedBy": [ref(manager)]},
        Actions={"#ComputerSystem.Reset": {"target": f"{system}/Actions/ComputerSystem.Reset",
                                           "ResetType@Redfish.AllowableValues": RESET_TYPES}})
    collection(f"{system}/Processors", "#ProcessorCollection.ProcessorCollection", "Processors", cpus + gpus)
    for n, uri in enumerate(cpus):
        add(uri, "#Processor.v1_18_0.Processor", Id=f"CPU{n}", Name=f"CPU {n}", ProcessorType="CPU",
            Manufacturer="AMD", Model="AMD EPYC 9554 64-Core Processor", Socket=f"CPU{n}",
            TotalCores=64, TotalThreads=128, Status=ok)
    for n, uri in enumerate(gpus):
        add(uri, "#Processor.v1_18_0.Processor", Id=f"GPU{n}", Name=f"GPU {n}", ProcessorType="GPU",
            Manufacturer="NVIDIA", Model="H100 SXM5 80GB", Socket=f"SXM{n + 1}", Status=ok)
    collection(f"{system}/EthernetInterfaces", "#EthernetInterfaceCollection.EthernetInterfaceCollection",
               "Ethernet Interfaces", nics)
    for n, uri in enumerate(nics, 1):
        mac = f"00:00:00:1A:01:{n:02X}"   # the first three octets are replaced per BMC
        add(uri, "#EthernetInterface.v1_9_0.EthernetInterface", Id=uri.rsplit("/", 1)[1],
            Name=f"25GbE port {n}", MACAddress=mac, PermanentMACAddress=mac, SpeedMbps=25000,
            LinkStatus="LinkUp", Status=ok)

    attributes = {name: default for name, _, default, _, _ in BIOS_ATTRIBUTES}
    entries = []
    for name, kind, default, extra, read_only in BIOS_ATTRIBUTES:
        entry = {"AttributeName": name, "DisplayName": name, "Type": kind, "ReadOnly": read_only,
                 "ResetRequired": True}
        if not read_only:
            entry["DefaultValue"] = default
        if kind == "Enumeration":
            entry["Value"] = [{"ValueName": v, "ValueDisplayName": v} for v in extra]
        else:
            entry.update(extra)
        entries.append(entry)
    add(bios, "#Bios.v1_2_0.Bios", Id="Bios", Name="BIOS Configuration Current Settings",
        AttributeRegistry=registry_id, Attributes=attributes, ResetBiosToDefaultsPending=False,
        **{"@Redfish.Settings": {"@odata.type": "#Settings.v1_4_0.Settings",
                                 "SettingsObject": ref(f"{bios}/Settings"),
                                 "SupportedApplyTimes": ["OnReset", "Immediate"], "Messages": []}},
        Actions={"#Bios.ResetBios": {"target": f"{bios}/Actions/Bios.ResetBios"}})
    add(f"{bios}/Settings", "#Bios.v1_2_0.Bios", Id="Settings", Name="BIOS Configuration Pending Settings",
        AttributeRegistry=registry_id, Attributes=dict(attributes))
    collection(f"{ROOT}/Registries", "#MessageRegistryFileCollection.MessageRegistryFileCollection",
               "Registries", [f"{ROOT}/Registries/{registry_id}"])
    add(f"{ROOT}/Registries/{registry_id}", "#MessageRegistryFile.v1_1_3.MessageRegistryFile", Id=registry_id,
        Name="BIOS Attribute Registry File", Registry=registry_id, Languages=["en"],
        Location=[{"Language": "en", "Uri": f"{ROOT}/Registries/{registry_id}.json"}])
    docs[f"{ROOT}/Registries/{registry_id}.json"] = {
        "@odata.type": "#AttributeRegistry.v1_3_8.AttributeRegistry", "Id": registry_id,
        "Name": "GX8 BIOS Attribute Registry", "Language": "en", "OwningEntity": "Mockwell",
        "RegistryVersion": "1.0.0", "SupportedSystems": [{"ProductName": "GX8-H100", "SystemId": "GX8"}],
        "RegistryEntries": {"Attributes": entries}}

    # NVMe drives (their temperatures in their EnvironmentMetrics) and the chassis; the sensor resources
    # come from sensor_tree.
    collection(f"{system}/Storage", "#StorageCollection.StorageCollection", "Storage", [f"{system}/Storage/NVMe"])
    add(f"{system}/Storage/NVMe", "#Storage.v1_13_0.Storage", Id="NVMe", Name="NVMe Storage", Status=ok,
        Drives=[ref(d) for d in BUILTIN_DRIVES], **{"Drives@odata.count": len(BUILTIN_DRIVES)})
    for n, drive in enumerate(BUILTIN_DRIVES):
        add(drive, "#Drive.v1_14_0.Drive", Id=f"NVMe{n}", Name=f"NVMe{n}", MediaType="SSD", Protocol="NVMe",
            CapacityBytes=3840755982336, Status=ok, EnvironmentMetrics=ref(f"{drive}/EnvironmentMetrics"),
            Links={"Chassis": ref(chassis)})
    collection(f"{ROOT}/Chassis", "#ChassisCollection.ChassisCollection", "Chassis", [chassis, gpu_board])
    add(chassis, "#Chassis.v1_23_0.Chassis", Id="Chassis.Embedded.1", Name="Chassis", ChassisType="RackMount",
        Manufacturer="Mockwell", Model="GX8-H100", PowerState="Off", Status=ok, IndicatorLED="Off",
        LocationIndicatorActive=False, **{key: ref(f"{chassis}/{key}") for key in SENSOR_LINKS},
        Links={"ComputerSystems": [ref(system)], "ManagedBy": [ref(manager)], "Contains": [ref(gpu_board)],
               "Drives": [ref(d) for d in BUILTIN_DRIVES]})
    add(gpu_board, "#Chassis.v1_23_0.Chassis", Id="GPU_Baseboard", Name="GPU Baseboard", ChassisType="Module",
        Manufacturer="NVIDIA", Model="HGX H100 8-GPU", PowerState="Off", Status=ok,
        **{key: ref(f"{gpu_board}/{key}") for key in SENSOR_LINKS if key != "PowerSubsystem"},
        Links={"ComputerSystems": [ref(system)], "ManagedBy": [ref(manager)], "ContainedBy": ref(chassis)})
    docs.update(sensor_tree(sensor_defaults(), POWER_LIMIT))
    collection(f"{ROOT}/Managers", "#ManagerCollection.ManagerCollection", "Managers", [manager])
    add(manager, "#Manager.v1_19_0.Manager", Id="BMC.Embedded.1", Name="BMC", ManagerType="BMC",
        FirmwareVersion="", UUID="", Status=ok, LogServices=ref(f"{manager}/LogServices"),
        Links={"ManagerForServers": [ref(system)], "ManagerForChassis": [ref(chassis)]},
        Actions={"#Manager.Reset": {"target": f"{manager}/Actions/Manager.Reset",
                                    "ResetType@Redfish.AllowableValues": list(MANAGER_RESET_TYPES)}})
    # Event logs, empty at start: the host's SEL on the system, the BMC's own log on the manager.
    for owner, log_id, name, entry_type in ((system, "SEL", "System Event Log", "SEL"),
                                            (manager, "EventLog", "BMC Event Log", "Event")):
        service = f"{owner}/LogServices/{log_id}"
        collection(f"{owner}/LogServices", "#LogServiceCollection.LogServiceCollection", "Log Services",
                   [service])
        add(service, "#LogService.v1_5_0.LogService", Id=log_id, Name=name, LogEntryType=entry_type,
            MaxNumberOfRecords=4000, OverWritePolicy="WrapsWhenFull", ServiceEnabled=True, Status=ok,
            Entries=ref(f"{service}/Entries"),
            Actions={"#LogService.ClearLog": {"target": f"{service}/Actions/LogService.ClearLog"}})
        collection(f"{service}/Entries", "#LogEntryCollection.LogEntryCollection", f"{name} Entries", [])

    add(update, "#UpdateService.v1_14_0.UpdateService", Id="UpdateService", Name="Update Service",
        ServiceEnabled=True, MultipartHttpPushUri=f"{update}/upload", MaxImageSizeBytes=0,
        FirmwareInventory=ref(inventory),
        Actions={"#UpdateService.SimpleUpdate": {"target": f"{update}/Actions/UpdateService.SimpleUpdate",
                                                 "@Redfish.ActionInfo": f"{update}/SimpleUpdateActionInfo"}})
    add(f"{update}/SimpleUpdateActionInfo", "#ActionInfo.v1_3_0.ActionInfo", Id="SimpleUpdateActionInfo",
        Name="SimpleUpdate Action Info", Parameters=[
            {"Name": "ImageURI", "Required": True, "DataType": "String"},
            {"Name": "TransferProtocol", "Required": False, "DataType": "String",
             "AllowableValues": ["HTTP", "HTTPS"]},
            {"Name": "Targets", "Required": False, "DataType": "StringArray"}])
    firmware = [("BMC", "BMC Firmware", "2.0.0", manager, True), ("BIOS", "BIOS", "1.0.0", system, True),
                ("NIC0", "25GbE NIC Firmware", "22.31.6", nics[0], True),
                *[(f"GPU{n}", f"GPU {n} Firmware", "96.00.89.00.01", gpus[n], True) for n in range(8)],
                ("CPLD", "Baseboard CPLD", "1.2", chassis, False)]
    collection(inventory, "#SoftwareInventoryCollection.SoftwareInventoryCollection", "Firmware Inventory",
               [f"{inventory}/{fid}" for fid, *_ in firmware])
    for fid, name, version, related, updateable in firmware:
        add(f"{inventory}/{fid}", "#SoftwareInventory.v1_10_0.SoftwareInventory", Id=fid, Name=name,
            Version=version, Updateable=updateable, RelatedItem=[ref(related)], Status=ok,
            SoftwareId=f"GX8-{fid}")
    add(f"{ROOT}/TaskService", "#TaskService.v1_2_0.TaskService", Id="TaskService", Name="Task Service",
        ServiceEnabled=True, CompletedTaskOverWritePolicy="Oldest", Tasks=ref(f"{ROOT}/TaskService/Tasks"))
    collection(f"{ROOT}/TaskService/Tasks", "#TaskCollection.TaskCollection", "Tasks", [])
    return docs


class Tree:
    """The immutable resource tree shared by all BMCs of the process, completed with what §4 of the
    mockups README says the DMTF trees lack, plus the URIs of the resources that carry state."""

    def __init__(self, docs, builtin=False):
        self.docs = docs
        docs.setdefault("/redfish", {"v1": ROOT + "/"})
        root = docs[ROOT]
        self.system = docs[root["Systems"]["@odata.id"]]["Members"][0]["@odata.id"]
        self.manager = docs[root["Managers"]["@odata.id"]]["Members"][0]["@odata.id"]
        system = docs[self.system]
        self.chassis = [c["@odata.id"] for c in system.get("Links", {}).get("Chassis", [])]
        reset = system["Actions"]["#ComputerSystem.Reset"]
        self.reset_target = reset["target"]
        self.reset_types = reset.setdefault("ResetType@Redfish.AllowableValues", list(RESET_TYPES))
        if "PowerCycle" not in self.reset_types:
            self.reset_types.append("PowerCycle")
        boot = system["Boot"]
        boot.setdefault("BootSourceOverrideEnabled@Redfish.AllowableValues", ["Disabled", "Once", "Continuous"])
        boot.setdefault("BootSourceOverrideMode@Redfish.AllowableValues", ["UEFI", "Legacy"])
        self.boot_values = {k: boot[k + "@Redfish.AllowableValues"] for k in BOOT_KEYS}

        self.bios = system["Bios"]["@odata.id"]
        bios = docs[self.bios]
        settings = bios["@Redfish.Settings"]
        self.apply_times = settings.setdefault("SupportedApplyTimes", ["OnReset", "Immediate"])
        self.settings = settings["SettingsObject"]["@odata.id"]
        self.reset_bios = bios.get("Actions", {}).get("#Bios.ResetBios", {}).get("target")
        pending_view = docs[self.settings]["Attributes"]
        self.initial_pending = {k: v for k, v in pending_view.items() if bios["Attributes"].get(k) != v}
        self.attributes = self._attribute_registry(root["Registries"]["@odata.id"], bios["AttributeRegistry"],
                                                   bios["Attributes"], pending_view)
        self.bios_defaults = {n: e["DefaultValue"] for n, e in self.attributes.items() if "DefaultValue" in e}

        self.sessions = root["Links"]["Sessions"]["@odata.id"]
        self.session_service = root.get("SessionService", {}).get("@odata.id")
        # The manager's own reset, the mock's account (the first of the AccountService's Accounts) and the rack
        # chassis (the system's first chassis, whose identify LED the system shares); added where a tree lacks them.
        reset = docs[self.manager].setdefault("Actions", {}).setdefault("#Manager.Reset", {})
        self.manager_reset = reset.setdefault("target", f"{self.manager}/Actions/Manager.Reset")
        self.manager_reset_types = reset.setdefault("ResetType@Redfish.AllowableValues", list(MANAGER_RESET_TYPES))
        self.account_service = root.setdefault("AccountService", ref(f"{ROOT}/AccountService"))["@odata.id"]
        service = docs.setdefault(self.account_service, {
            "@odata.id": self.account_service, "@odata.type": "#AccountService.v1_13_0.AccountService",
            "Id": "AccountService", "Name": "Account Service", "ServiceEnabled": True})
        self.accounts = service.setdefault("Accounts", ref(f"{self.account_service}/Accounts"))["@odata.id"]
        listing = docs.setdefault(self.accounts, {
            "@odata.id": self.accounts, "@odata.type": "#ManagerAccountCollection.ManagerAccountCollection",
            "Name": "Accounts", "Members": []})
        if not listing.get("Members"):
            listing["Members"], listing["Members@odata.count"] = [ref(f"{self.accounts}/1")], 1
        self.account = listing["Members"][0]["@odata.id"]
        docs.setdefault(self.account, {"@odata.id": self.account, "@odata.type": "#ManagerAccount.v1_10_0.ManagerAccount",
                                       "Id": self.account.rsplit("/", 1)[1], "Name": "User Account",
                                       "AccountTypes": ["Redfish"]})
        self.rack = self.chassis[0] if self.chassis and self.chassis[0] in docs else None
        self.led_initial = system.get("IndicatorLED") if system.get("IndicatorLED") in LED_STATES else "Off"
        self.update = root["UpdateService"]["@odata.id"]
        update = docs[self.update]
        self.push_uri = update.setdefault("MultipartHttpPushUri", self.update + "/upload")
        action = update["Actions"]["#UpdateService.SimpleUpdate"]
        self.simple_update = action["target"]
        info = docs.get(action.get("@Redfish.ActionInfo"), {})
        self.protocols = next((p["AllowableValues"] for p in info.get("Parameters", [])
                               if p["Name"] == "TransferProtocol" and "AllowableValues" in p), PROTOCOLS)
        self.firmware, self.versions, self.updateable = {}, {}, {}   # by SoftwareInventory Id
        self.bmc_fw = self.bios_fw = None
        for member in docs[update["FirmwareInventory"]["@odata.id"]]["Members"]:
            doc = docs[member["@odata.id"]]
            fid, related = doc["Id"], {r["@odata.id"] for r in doc.get("RelatedItem", [])}
            self.firmware[fid] = member["@odata.id"]
            self.versions[fid], self.updateable[fid] = doc["Version"], doc.get("Updateable", False)
            if self.manager in related:
                self.bmc_fw = fid
            if self.system in related:
                self.bios_fw = fid
        self.firmware_by_uri = {uri: fid for fid, uri in self.firmware.items()}

        task_service = root["Tasks"]["@odata.id"]
        self.tasks = docs[task_service]["Tasks"]["@odata.id"]
        self.monitors = task_service + "/TaskMonitors"
        task_ids = [m["@odata.id"].rsplit("/", 1)[1] for m in docs[self.tasks]["Members"]]
        self.first_task = 1 + max((int(t) for t in task_ids if t.isdigit()), default=0)

        # Event logs of the system and the manager: entries URI -> {id, type, initial entries, clear}
        self.logs, self.log_roots, self.clear_targets = {}, [], {}
        for owner in (self.system, self.manager):
            root_uri = docs[owner].get("LogServices", {}).get("@odata.id")
            if root_uri not in docs:
                continue
            self.log_roots.append(root_uri)
            for member in docs[root_uri].get("Members", []):
                service = docs.get(member["@odata.id"], {})
                entries = service.get("Entries", {}).get("@odata.id")
                if entries is None:
                    continue
                initial = []   # a tree's entries: inline in the collection, or their own documents
                for m in docs.get(entries, {}).get("Members", []):
                    doc = m if len(m) > 1 else docs.get(m["@odata.id"])
                    if doc:
                        initial.append(copy.deepcopy(doc))
                clear = service.get("Actions", {}).get("#LogService.ClearLog", {}).get("target")
                self.logs[entries] = {"id": service.get("Id", entries.rsplit("/", 2)[-2]),
                                      "type": "SEL" if service.get("LogEntryType") == "SEL" else "Event",
                                      "initial": initial}
                if clear:
                    self.clear_targets[clear] = entries

        nics = docs[system["EthernetInterfaces"]["@odata.id"]]["Members"] if "EthernetInterfaces" in system else []
        self.roles = {ROOT: ("root",), self.system: ("system",), self.manager: ("manager",),
                      self.bios: ("bios",), self.settings: ("settings",), self.update: ("update",),
                      self.sessions: ("sessions",), self.tasks: ("tasks",),
                      self.registry_file: ("registry_file",),
                      self.account_service: ("account_service",), self.account: ("account",),
                      **({self.session_service: ("session_service",)} if self.session_service in docs else {}),
                      **{c: ("chassis",) for c in self.chassis},
                      **{m["@odata.id"]: ("nic",) for m in nics},
                      **{uri: ("firmware", fid) for fid, uri in self.firmware.items()}}
        self.post_targets = {u for u in (self.reset_target, self.simple_update, self.push_uri, self.reset_bios,
                                         self.manager_reset) if u}
        self.post_targets |= set(self.clear_targets)

        # Sensors: the resources the system's chassis (and their drives) link, by group (SENSOR_LINKS; a
        # drive's EnvironmentMetrics counts as "subsystems"), which sensor_shapes hides. The built-in ones
        # (sensor_views) are rendered from each BMC's values; a DMTF tree's are served as they are.
        self.sensor_roots = {group: [] for group in SHAPES["both"]}
        self.drives = []
        for uri in self.chassis:
            doc = docs.get(uri, {})
            for key, group in SENSOR_LINKS.items():
                if key in doc:
                    self.sensor_roots[group].append(doc[key]["@odata.id"])
            for drive in doc.get("Links", {}).get("Drives", []):
                self.drives.append(drive["@odata.id"])
                env = docs.get(drive["@odata.id"], {}).get("EnvironmentMetrics")
                if env:
                    self.sensor_roots["subsystems"].append(env["@odata.id"])
        self.every_sensor_root = [r for roots in self.sensor_roots.values() for r in roots]
        self.sensor_docs = {u for u in docs if self.is_sensor_path(u)}
        self.sensor_views = set(sensor_tree(sensor_defaults(), POWER_LIMIT)) if builtin else set()
        self.extra_root = f"{BUILTIN_CHASSIS['main']}/Sensors" if builtin else None
        # The power limit: the first EnvironmentMetrics with PowerLimitWatts, the first Power whose
        # PowerControl[0] has a PowerLimit; both show (and PATCH sets) one per-BMC state.
        self.limit_env = next((u for u in self.sensor_roots["subsystems"] if "PowerLimitWatts" in docs.get(u, {})),
                              None)
        self.limit_power = next((u for u in self.sensor_roots["deprecated"]
                                 if "PowerLimit" in (docs.get(u, {}).get("PowerControl") or [{}])[0]), None)
        self.limit_initial = None
        if self.limit_env:
            limit = docs[self.limit_env]["PowerLimitWatts"]
            self.limit_initial = {"set_point": limit.get("SetPoint"), "control_mode": limit.get("ControlMode", "Automatic"),
                                  "allowable_min": limit.get("AllowableMin"), "allowable_max": limit.get("AllowableMax")}
        elif self.limit_power:
            watts = docs[self.limit_power]["PowerControl"][0]["PowerLimit"].get("LimitInWatts")
            self.limit_initial = {"set_point": watts, "control_mode": "Disabled" if watts is None else "Automatic",
                                  "allowable_min": None, "allowable_max": None}
        if self.limit_initial is not None:
            published = (docs[self.limit_power]["PowerControl"][0]["PowerLimit"] if self.limit_power else {})
            self.limit_initial["exception"] = published.get("LimitException")
        self.limit_paths = [u for u in (self.limit_env, self.limit_power) if u]
        self.roles.update({d: ("drive",) for d in self.drives})
        self.roles.update({u: ("sensor",) for u in self.sensor_docs})

    def is_sensor_path(self, path):
        """Whether path is one of the sensor resources (or below one), whichever the shape."""
        return any(path == r or path.startswith(r + "/") for r in self.every_sensor_root)

    def _attribute_registry(self, registries, registry_id, current, pending_view):
        """The BIOS attribute table {name: registry entry}: the published registry, or (DMTF trees
        publish none) one synthesised from the Bios and Bios/Settings values and then published."""
        collection = self.docs[registries]
        for member in collection["Members"]:
            file = self.docs.get(member["@odata.id"], {})
            if registry_id in (file.get("Id"), file.get("Registry")):
                self.registry_file = member["@odata.id"]
                body = self.docs[file["Location"][0]["Uri"]]
                return {e["AttributeName"]: e for e in body["RegistryEntries"]["Attributes"]}
        entries = []
        for name, value in current.items():
            seen = [value, pending_view.get(name, value)]
            entry = {"AttributeName": name, "DisplayName": name, "ReadOnly": False, "DefaultValue": value}
            if isinstance(value, bool):
                entry["Type"] = "Boolean"
            elif isinstance(value, int):
                entry["Type"] = "Integer"
            elif all(isinstance(v, str) and re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", v) for v in seen):
                if {"Enabled", "Disabled"} & set(seen):
                    seen += ["Enabled", "Disabled"]
                entry["Type"] = "Enumeration"
                entry["Value"] = [{"ValueName": v, "ValueDisplayName": v} for v in dict.fromkeys(seen)]
            else:
                entry["Type"] = "String"
            entries.append(entry)
        file_uri, body_uri = f"{registries}/{registry_id}", f"{registries}/{registry_id}.json"
        self.registry_file = file_uri
        self.docs[file_uri] = {"@odata.id": file_uri, "@odata.type": "#MessageRegistryFile.v1_1_3.MessageRegistryFile",
                               "Id": registry_id, "Name": "BIOS Attribute Registry File", "Registry": registry_id,
                               "Languages": ["en"], "Location": [{"Language": "en", "Uri": body_uri}]}
        self.docs[body_uri] = {"@odata.type": "#AttributeRegistry.v1_3_8.AttributeRegistry", "Id": registry_id,
                               "Name": "BIOS Attribute Registry (synthesised by the mock)", "Language": "en",
                               "RegistryVersion": "1.0.0", "OwningEntity": "Rackpilot mock",
                               "RegistryEntries": {"Attributes": entries}}
        collection["Members"].append(ref(file_uri))
        collection["Members@odata.count"] = len(collection["Members"])
        return {e["AttributeName"]: e for e in entries}

    def check_attribute(self, name, value):
        """None if `value` may be written to BIOS attribute `name`, else the error message."""
        entry, rel = self.attributes.get(name), "/Attributes/" + name
        if entry is None:
            return message("PropertyUnknown", name, related=rel)
        if entry.get("ReadOnly"):
            return message("PropertyNotWritable", name, related=rel)
        kind = entry["Type"]
        want = {"Enumeration": str, "String": str, "Password": str, "Integer": int, "Boolean": bool}[kind]
        if not isinstance(value, want) or (want is int and isinstance(value, bool)):
            return message("PropertyValueTypeError", show(value), name, related=rel)
        if kind == "Enumeration" and value not in [v["ValueName"] for v in entry["Value"]]:
            return message("PropertyValueNotInList", value, name, related=rel)
        if kind == "Integer":
            size, low, high = value, entry.get("LowerBound"), entry.get("UpperBound")
        elif kind in ("String", "Password"):
            size, low, high = len(value), entry.get("MinLength"), entry.get("MaxLength")
        else:
            return None
        if (low is not None and size < low) or (high is not None and size > high):
            return message("PropertyValueOutOfRange", show(value), name, related=rel)
        return None


# ---------------------------------------------------------------------------------------------
# One BMC
# ---------------------------------------------------------------------------------------------

class Bmc:
    """The state and request handling of one BMC. Every entry point holds self.lock."""

    def __init__(self, tree, index, serial, config):
        self.t = tree
        self.lock = threading.Lock()
        self.cfg = dict(config)
        self.serial = serial
        self.uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"urn:rackpilot-mock-bmc:{serial}:system"))
        self.service_uuid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"urn:rackpilot-mock-bmc:{serial}:bmc"))
        self.mac_prefix = f"02:{index >> 8 & 0xFF:02X}:{index & 0xFF:02X}"
        system = tree.docs[tree.system]
        self.power = system["PowerState"]
        self.steps = []            # scheduled power transitions: (monotonic due time, state, boot event?)
        self.boot = {k: system["Boot"][k] for k in BOOT_KEYS}
        self.boots, self.last_reset = [], None
        self.bios = dict(tree.docs[tree.bios]["Attributes"])
        self.pending = dict(tree.initial_pending)
        self.defaults_pending = tree.docs[tree.bios].get("ResetBiosToDefaultsPending", False)
        self.settings_applied = None   # Time/ETag/Messages of @Redfish.Settings after the last apply
        self.firmware, self.staged = dict(tree.versions), {}
        self.update_count = dict.fromkeys(tree.firmware, 0)
        self.tasks, self.next_task = {}, tree.first_task
        self.sessions = {}             # token -> {"id", "user", "uses"}
        self.revs = {}                 # URI -> revision, for ETags
        self.actions, self.requests, self.unavailable = [], 0, 0
        self.index, self.logins = index, 0
        self.rng = random.Random(f"0:{index}")
        self.faults = {"503": 0, "429": 0, "dropped": 0, "lost_answers": 0, "slow_answers": 0,
                       "sessions_dropped": 0, "unreachable_drops": 0}
        self.down_until = 0.0          # monotonic time the BMC answers again (unreachable_s, reboots)
        self.rebooting = None          # the update task that completes while the BMC is down
        self.logs = {uri: copy.deepcopy(log["initial"]) for uri, log in tree.logs.items()}
        self.sensors = sensor_defaults() if tree.sensor_views else {}
        self.limit = dict(tree.limit_initial) if tree.limit_initial else None
        self.sensor_cache = None       # sensor_tree of the current values, made again after a change
        self.log_next = {uri: 1 + max((int(e["Id"]) for e in entries if str(e.get("Id", "")).isdigit()), default=0)
                         for uri, entries in self.logs.items()}
        self.password_changes = self.manager_resets = 0
        self.manager_reset_at = self._now()   # the manager's LastResetTime: its start, then each Manager.Reset
        self.led, self.led_changes, self.led_patches = tree.led_initial, 0, 0   # the identify LED (IndicatorLED)

    # -- entry points (called by the HTTP handler) --------------------------------------------

    def delay(self):
        return self.cfg["delay_ms"] / 1000

    def max_body(self):
        return self.cfg["max_image_bytes"] + (1 << 20)

    def down(self):
        """Seconds the BMC stays unreachable (0: it answers)."""
        return max(0.0, self.down_until - time.monotonic())

    def refusing(self):
        return self.cfg["unreachable_mode"] == "refuse" and self.down() > 0

    def skew(self):
        return self.cfg["clock_skew_s"]

    def _now(self):
        return (datetime.now(timezone.utc) + timedelta(seconds=self.skew())).isoformat(timespec="seconds")

    def _come_back(self):
        """After a reboot mid-update: the update went through while the BMC was down."""
        if self.rebooting is None or self.down() > 0:
            return
        task, self.rebooting = self.rebooting, None
        while task["doc"]["TaskState"] not in TERMINAL:
            self._advance_task(task)
        self.sessions.clear()
        self._touch(self.t.sessions, self.t.manager)

    def _drop_sessions(self):
        if self.sessions:
            self.faults["sessions_dropped"] += 1
        self.sessions.clear()
        self._touch(self.t.sessions)

    def _busy(self, status):
        wait = self.cfg["retry_after"]
        value = formatdate(time.time() + self.skew() + wait, usegmt=True) if self.cfg["retry_after_date"] \
            else str(wait)
        return HttpError(status, message("ServiceTemporarilyUnavailable", wait), {"Retry-After": value})

    def _faults(self, method, path):
        """The injected faults a Redfish request meets before it is handled."""
        cfg, rng = self.cfg, self.rng
        if self.down() > 0:
            self.faults["unreachable_drops"] += 1
            raise Drop()
        if cfg["drop_rate"] and rng.random() < cfg["drop_rate"]:
            self.faults["dropped"] += 1
            raise Drop()
        if cfg["drop_sessions_after"] > 0:
            cfg["drop_sessions_after"] -= 1
            if cfg["drop_sessions_after"] == 0:
                self._drop_sessions()
        if cfg["drop_sessions_rate"] and rng.random() < cfg["drop_sessions_rate"]:
            self._drop_sessions()
        for status in ("503", "429"):
            if cfg["fail_rate_" + status] and rng.random() < cfg["fail_rate_" + status]:
                self.faults[status] += 1
                raise self._busy(int(status))
        if cfg["reboot_during_update_s"] > 0 and method in ("GET", "HEAD"):
            task = self._task_for(path)
            if task and task["doc"]["TaskState"] not in TERMINAL and self.rebooting is None:
                self.rebooting = task
                self.down_until = time.monotonic() + cfg["reboot_during_update_s"]
                self.faults["unreachable_drops"] += 1
                raise Drop()

    def handle(self, method, path, headers, body, query=""):
        with self.lock:
            self.requests += 1
            self._advance_power()
            self._come_back()
            try:
                self._faults(method, path)
                if self.cfg["fail_next_503"] > 0 or self.unavailable > 0:
                    if self.cfg["fail_next_503"] > 0:
                        self.cfg["fail_next_503"] -= 1
                    else:
                        self.unavailable -= 1
                    raise self._busy(503)
                if method in ("GET", "HEAD") and self.cfg["fail_sensor_503"] > 0 and self._sensor_path(path):
                    self.cfg["fail_sensor_503"] -= 1
                    self.faults["503"] += 1
                    raise self._busy(503)
                acted = len(self.actions)
                response = self._dispatch(method, path, headers, body, query)
                if self.cfg["lose_next_answers"] > 0 and len(self.actions) > acted:
                    self.cfg["lose_next_answers"] -= 1
                    self.faults["lost_answers"] += 1
                    raise Drop()
                if self.cfg["slow_next_answers"] > 0 and len(self.actions) > acted:
                    self.cfg["slow_next_answers"] -= 1
                    self.faults["slow_answers"] += 1
                    raise Hold(response, self.cfg["slow_answer_s"])   # the handler waits, unlocked
                return response
            except HttpError as e:
                status, hdrs, doc = e.response()
                if self.cfg["error_text"]:
                    doc["error"]["message"] = self.cfg["error_text"]
                    for m in doc["error"]["@Message.ExtendedInfo"]:
                        m["Message"] = self.cfg["error_text"]
                return status, hdrs, doc

    def control(self, method, path, headers, body):
        """The test hooks under /__mock/ (no authentication, no Content-Type check)."""
        with self.lock:
            self._advance_power()
            self._come_back()
            try:
                if (method, path) == ("GET", "/__mock/state"):
                    return 200, {}, self._state()
                if (method, path) == ("GET", "/__mock/config"):
                    return 200, {}, dict(self.cfg)
                if (method, path) == ("POST", "/__mock/config"):
                    self._configure(parse_json(body))
                    return 200, {}, dict(self.cfg)
                if (method, path) == ("POST", "/__mock/power"):
                    state = parse_json(body).get("state")
                    if state not in ("On", "Off"):
                        raise HttpError(400, message("PropertyValueNotInList", show(state), "state"))
                    self.steps = []
                    self._set_power(state)
                    return 200, {}, self._state()
                if (method, path) == ("POST", "/__mock/log"):
                    return 200, {}, self._add_log_entry(parse_json(body))
                if (method, path) == ("GET", "/__mock/sensors"):
                    return 200, {}, copy.deepcopy(self.sensors)
                if (method, path) == ("POST", "/__mock/sensor"):
                    return 200, {}, self._set_sensor(parse_json(body))
                if (method, path) == ("POST", "/__mock/power_limit"):
                    return 200, {}, self._set_limit(parse_json(body))
                raise not_found(path)
            except HttpError as e:
                return e.response()

    def _state(self):
        return copy.deepcopy({
            "serial": self.serial, "uuid": self.uuid, "power": self.power,
            "boot": {"target": self.boot["BootSourceOverrideTarget"],
                     "enabled": self.boot["BootSourceOverrideEnabled"],
                     "mode": self.boot["BootSourceOverrideMode"]},
            "boots": self.boots,
            "bios": {"current": self.bios, "pending": self.pending, "reset_to_defaults_pending": self.defaults_pending},
            "firmware": self.firmware, "staged_firmware": self.staged, "update_count": self.update_count,
            "tasks": {tid: task["doc"]["TaskState"] for tid, task in self.tasks.items()},
            "actions": self.actions, "sessions": len(self.sessions), "requests": self.requests,
            "unavailable_requests": self.unavailable, "logins": self.logins, "faults": self.faults,
            "unreachable_for_s": round(self.down(), 3),
            "logs": {self.t.logs[uri]["id"]: len(entries) for uri, entries in self.logs.items()},
            "sensors": {sid: v["reading"] for sid, v in self.sensors.items()}, "power_limit": self.limit,
            "password_changes": self.password_changes, "manager_resets": self.manager_resets,
            "manager_last_reset": self.manager_reset_at,
            "indicator": {"led": self.led, "active": self.led != "Off", "changes": self.led_changes,
                          "patches": self.led_patches}})

    def _add_log_entry(self, spec):
        """POST /__mock/log {service?, severity?, message?, message_id?, created?}: append one entry to a
        log service (by Id; default the system's first). created: RFC 3339 text, null for an entry
        without Created, absent for now."""
        logs = {log["id"]: uri for uri, log in reversed(list(self.t.logs.items()))}
        uri = logs.get(spec.get("service")) if "service" in spec else next(iter(self.t.logs), None)
        if uri is None:
            raise HttpError(400, message("PropertyValueNotInList", show(spec.get("service")), "service"))
        severity = spec.get("severity", "OK")
        if severity not in LOG_SEVERITIES:
            raise HttpError(400, message("PropertyValueNotInList", show(severity), "severity"))
        for key in ("message", "message_id"):
            if not isinstance(spec.get(key, ""), str):
                raise HttpError(400, message("PropertyValueTypeError", show(spec[key]), key))
        created = spec.get("created", now())
        if created is not None and not isinstance(created, str):
            raise HttpError(400, message("PropertyValueTypeError", show(created), "created"))
        eid = str(self.log_next[uri])
        self.log_next[uri] += 1
        entry = {"@odata.id": f"{uri}/{eid}", "@odata.type": "#LogEntry.v1_15_0.LogEntry", "Id": eid,
                 "Name": f"Log Entry {eid}", "EntryType": self.t.logs[uri]["type"], "Severity": severity,
                 "Message": spec.get("message", ""), "MessageId": spec.get("message_id", "Mock.1.0.Event"),
                 "MessageArgs": []}
        if created is not None:
            entry["Created"] = created
        self.logs[uri].append(entry)
        self._touch(uri)
        return entry

    def _configure(self, changes):
        for key, value in changes.items():
            if key not in DEFAULTS:
                raise HttpError(400, message("PropertyUnknown", key))
            want = type(DEFAULTS[key])
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            fits = (isinstance(value, want) and (want is bool) == isinstance(value, bool)) or \
                   (want is float and number)
            if want is list and fits:
                fits = all(isinstance(v, str) for v in value)
            if want is dict and fits and key == "broken_paths":
                fits = all(k.startswith("/") and v in BROKEN for k, v in value.items())
            elif want is dict and fits:
                fits = all(k in LINK_KINDS and isinstance(v, str) for k, v in value.items())
            if key == "limit_exceptions" and fits and not set(value) <= set(LIMIT_EXCEPTIONS):
                raise HttpError(400, message("PropertyValueNotInList", show(value), key))
            if not fits or (number and value < 0 and key != "clock_skew_s"):
                raise HttpError(400, message("PropertyValueTypeError", show(value), key))
            if (key.startswith("fail_rate_") or key.endswith("_rate")) and value > 1:
                raise HttpError(400, message("PropertyValueOutOfRange", show(value), key))
            if key == "unreachable_mode" and value not in ("refuse", "drop"):
                raise HttpError(400, message("PropertyValueNotInList", show(value), key))
            if (key == "sensor_shapes" and value not in SHAPES) or \
                    (key == "expand_query" and value not in ("full", "ignored", "none", "refused")):
                raise HttpError(400, message("PropertyValueNotInList", show(value), key))
            if (key == "extra_sensors" and value > 20000) or (key == "extra_chassis" and value > EXTRA_CHASSIS_MAX) \
                    or (key == "chassis_padding_kb" and value > 16384):
                raise HttpError(400, message("PropertyValueOutOfRange", show(value), key))
            if (key == "password_charset" and value not in ("any", "alnum")) or \
                    (key == "indicator" and value not in INDICATOR_MODES):
                raise HttpError(400, message("PropertyValueNotInList", show(value), key))
            if key in ("password_min", "password_max") and \
                    changes.get("password_min", self.cfg["password_min"]) > \
                    changes.get("password_max", self.cfg["password_max"]):
                raise HttpError(400, message("PropertyValueOutOfRange", show(value), key))
        self.cfg.update(changes)
        t = self.t
        if {"password_min", "password_max"} & set(changes):
            self._touch(t.account_service)
        if {"user", "password_change_required"} & set(changes):
            self._touch(t.account)
        if "indicator" in changes:
            self._touch(t.system, t.rack)
        if "fault_seed" in changes:
            self.rng = random.Random(f"{changes['fault_seed']}:{self.index}")
        if changes.get("drop_sessions"):
            self._drop_sessions()
            self.cfg["drop_sessions"] = False
        if "unreachable_s" in changes:
            self.down_until = time.monotonic() + changes["unreachable_s"]
            self.cfg["unreachable_s"] = 0.0

    # -- helpers ------------------------------------------------------------------------------

    def _link(self, kind, path):
        """path as the BMC names it to clients: on the origin link_origins gives for kind, if any."""
        origin = self.cfg["link_origins"].get(kind)
        return origin + path if origin else path

    def _touch(self, *uris):
        for uri in uris:
            self.revs[uri] = self.revs.get(uri, 0) + 1

    def etag(self, uri):
        return f'"{zlib.crc32(uri.encode()):08x}.{self.revs.get(uri, 0)}"'

    def _json(self, headers, body):
        if not body.strip():
            return {}
        ctype = headers.get("Content-Type", "").split(";")[0].strip().lower()
        if ctype != "application/json":
            raise HttpError(415, message("HeaderInvalid", "Content-Type: " + ctype))
        return parse_json(body)

    def _session_by_uri(self, uri):
        return next((s for s in self.sessions.values() if f"{self.t.sessions}/{s['id']}" == uri), None)

    def _allow(self, path):
        """The Allow header value for an existing URI, None for an unknown one."""
        t = self.t
        if path == t.sessions:
            return "GET, HEAD, POST" if self.cfg["sessions"] else "GET, HEAD"
        if path.startswith(t.sessions + "/"):
            return "GET, HEAD, DELETE" if self._session_by_uri(path) else None
        if path in t.post_targets:
            return "POST"
        if self._sensor_hidden(path):
            return None
        if path in (t.system, t.settings, t.account, t.rack) or path in t.limit_paths:
            return "GET, HEAD, PATCH"
        return "GET, HEAD" if path in t.docs or self._task_for(path) else None

    def _not_allowed(self, path):
        allow = self._allow(path)
        if allow is None:
            return not_found(path)
        return HttpError(405, message("OperationNotAllowed"), {"Allow": allow})

    def _unauthorized(self):
        headers = {"WWW-Authenticate": 'Basic realm="Redfish"'} if self.cfg["basic_auth"] else {}
        return HttpError(401, message("NoValidSession"), headers)

    def _authenticate(self, headers):
        """The session the request carries, None for valid Basic credentials; else 401."""
        token = headers.get("X-Auth-Token")
        session = self.sessions.get(token) if token else None
        if session:
            session["uses"] += 1
            limit = self.cfg["session_expire_after"]
            if not limit or session["uses"] <= limit:
                return session
            del self.sessions[token]
            self._touch(self.t.sessions)
        scheme, _, credentials = headers.get("Authorization", "").partition(" ")
        if scheme.lower() == "basic" and self.cfg["basic_auth"]:
            try:
                user, _, password = base64.b64decode(credentials, validate=True).decode().partition(":")
            except ValueError:
                user = password = None
            if (user, password) == (self.cfg["user"], self.cfg["password"]):
                return None
        raise self._unauthorized()

    def _password_gate(self, session, method, path):
        """DSP0266 "Password change required": while it is, only GET of the account, PATCH of it and the
        DELETE of the own session pass; everything else gets 403 PasswordChangeRequired."""
        t = self.t
        if not self.cfg["password_change_required"]:
            return
        if path == t.account and method in ("GET", "HEAD", "PATCH"):
            return
        if session and method == "DELETE" and path == f"{t.sessions}/{session['id']}":
            return
        raise HttpError(403, message("PasswordChangeRequired", t.account))

    def _check_if_match(self, headers, uri, is_patch):
        value = headers.get("If-Match")
        if value is None:
            if is_patch and self.cfg["require_if_match"]:
                raise HttpError(428, message("PreconditionRequired"))
            return
        if self.cfg["fail_next_412"] > 0:
            self.cfg["fail_next_412"] -= 1
            raise HttpError(412, message("PreconditionFailed"))
        if value.strip() != "*" and self.etag(uri) not in [v.strip() for v in value.split(",")]:
            raise HttpError(412, message("PreconditionFailed"))

    # -- dispatch -----------------------------------------------------------------------------

    def _dispatch(self, method, path, headers, body, query=""):
        t = self.t
        if method in ("GET", "HEAD") and path in PUBLIC:
            return self._get(path)
        if (method, path) == ("POST", t.sessions):
            return self._login(headers, body)
        self._password_gate(self._authenticate(headers), method, path)
        if method in ("GET", "HEAD"):
            broken = next((kind for prefix, kind in self.cfg["broken_paths"].items()
                           if path == prefix or path.startswith(prefix.rstrip("/") + "/")), None)
            if broken == "garbage":
                return 200, {"Content-Type": "application/json"}, b'{"Name": "broken'
            if broken == "500":
                raise HttpError(500, message("InternalError"))
            response = self._get(path, query)
            if broken == "huge" and isinstance(response[2], dict):
                text = re.sub(r'"Reading": [^,}\]]+', '"Reading": 1e400', json.dumps(response[2]))
                return response[0], {**response[1], "Content-Type": "application/json"}, text.encode()
            return response
        if path.startswith(t.sessions + "/") and method == "DELETE":
            return self._logout(path)
        if path == t.sessions or path.startswith(t.sessions + "/"):
            raise self._not_allowed(path)
        entry = {"method": method, "path": path, "at": now()}
        self.actions.append(entry)
        try:
            response = self._modify(method, path, headers, body)
        except HttpError as e:
            entry["status"] = e.status
            raise
        entry["status"] = response[0]
        return response

    def _modify(self, method, path, headers, body):
        t = self.t
        if (method, path) == ("POST", t.push_uri):
            return self._push(headers, body)
        handler = {("PATCH", t.system): self._patch_system, ("PATCH", t.settings): self._patch_settings,
                   ("POST", t.reset_target): self._reset, ("POST", t.simple_update): self._simple_update,
                   ("POST", t.reset_bios): self._reset_bios, ("POST", t.manager_reset): self._manager_reset,
                   ("PATCH", t.account): self._patch_account, ("PATCH", t.rack): self._patch_rack,
                   }.get((method, path))
        if handler is None and method == "PATCH" and self.limit and not self._sensor_hidden(path):
            handler = {t.limit_env: self._patch_limit_env, t.limit_power: self._patch_limit_power}.get(path)
        if handler is None and method == "POST" and path in t.clear_targets:
            handler = lambda _body: self._clear_log(t.clear_targets[path])  # noqa: E731
        if handler is None:
            raise self._not_allowed(path)
        data = self._json(headers, body)
        if path in (t.reset_target, t.manager_reset) and "ResetType" in data:
            self.actions[-1]["reset_type"] = data["ResetType"]
        if path == t.simple_update and isinstance(data, dict) and "ImageURI" in data:
            self.actions[-1]["image_uri"] = data["ImageURI"]
        self._check_if_match(headers, path.split("/Actions/")[0], method == "PATCH")
        return handler(data)

    # -- GET ----------------------------------------------------------------------------------

    def _task_for(self, path):
        head, _, tid = path.rpartition("/")
        return self.tasks.get(tid) if head in (self.t.tasks, self.t.monitors) else None

    def _logs_hidden(self, path):
        return not self.cfg["log_services"] and any(path == r or path.startswith(r + "/") for r in self.t.log_roots)

    def _get(self, path, query=""):
        t, status = self.t, 200
        if self._logs_hidden(path) or self._sensor_hidden(path):
            raise not_found(path)
        if path in t.post_targets:
            raise self._not_allowed(path)
        task = self._task_for(path)
        if path in t.logs:
            doc = self._log_page(path, query)
        elif path.rpartition("/")[0] in t.logs:
            doc = next((e for e in self.logs[path.rpartition("/")[0]] if e.get("@odata.id") == path), None)
        elif task:    # each GET of a task or its monitor is one poll
            self._advance_task(task)
            if path.startswith(t.monitors + "/") and task["doc"]["TaskState"] not in TERMINAL:
                status = 202
            doc, path = self._task_doc(task), task["doc"]["@odata.id"]
        elif path.startswith(t.sessions + "/"):
            session = self._session_by_uri(path)
            doc = self._session_doc(session) if session else None
        else:
            doc = t.docs.get(path)
            role = t.roles.get(path)
            if role:
                doc = getattr(self, "_render_" + role[0])(copy.deepcopy(doc), *role[1:])
            elif doc is None:
                doc = self._extra_sensor(path) or self._extra_chassis(path)
        if doc is None:
            raise not_found(path)
        if isinstance(doc, bytes):
            return 200, {"Content-Type": "application/xml"}, doc
        doc = self._expand(doc, query)
        if "@odata.id" not in doc:
            return status, {}, doc
        etag = self.etag(path)
        return status, {"ETag": etag}, {**doc, "@odata.etag": etag}

    def _expand(self, doc, query):
        """A resource with $expand applied: its references ("." those outside Links, "~" those in Links,
        "*" all) replaced by the resources they name, $levels deep (default 1), as expand_query says."""
        values = parse_qs(query, keep_blank_values=True).get("$expand") if "expand" in query else None
        if values is None:
            return doc
        if self.cfg["expand_query"] == "none":
            raise HttpError(501, message("QueryNotSupported"))
        if self.cfg["expand_query"] == "refused":
            raise HttpError(400, message("QueryNotSupported"))
        match = re.fullmatch(r"([*.~])(?:\(\$levels=(\d+)\))?", values[-1])
        if not match or not 1 <= int(match.group(2) or 1) <= EXPAND["MaxLevels"]:
            raise HttpError(400, message("QueryParameterValueFormatError", values[-1], "$expand"))
        if self.cfg["expand_query"] == "ignored":
            return doc
        kind, levels = match.group(1), int(match.group(2) or 1)

        def walk(node, in_links, depth):
            if isinstance(node, list):
                return [walk(v, in_links, depth) for v in node]
            if not isinstance(node, dict):
                return node
            target = node.get("@odata.id")
            if len(node) == 1 and isinstance(target, str) and depth < levels and \
                    (kind == "*" or (kind == "~") == in_links) and target.startswith("/") and "#" not in target \
                    and not self._task_for(target):   # a task would advance: never expanded
                try:
                    return walk(self._get(target)[2], False, depth + 1)
                except HttpError:   # a dangling or hidden link stays a link
                    return node
            return {k: walk(v, in_links or k == "Links", depth) for k, v in node.items()}

        return walk(doc, False, 0)

    def _render_root(self, d):
        d["UUID"] = self.service_uuid
        features = d.setdefault("ProtocolFeaturesSupported", {})
        if self.cfg["expand_query"] == "none":
            features.pop("ExpandQuery", None)
        else:
            features.setdefault("ExpandQuery", dict(EXPAND))
        d["Links"]["Sessions"]["@odata.id"] = self._link("sessions", self.t.sessions)
        return d

    def _render_session_service(self, d):
        if "Sessions" in d:
            d["Sessions"]["@odata.id"] = self._link("sessions", d["Sessions"]["@odata.id"])
        return d

    def _render_registry_file(self, d):
        for location in d.get("Location", []):
            if "Uri" in location:
                location["Uri"] = self._link("registry", location["Uri"])
        return d

    def _render_system(self, d):
        d.update(PowerState=self.power, SerialNumber=self.serial, UUID=self.uuid)
        d["Actions"]["#ComputerSystem.Reset"]["target"] = self._link("reset_target", self.t.reset_target)
        links = d.get("Links", {})
        if "Chassis" in links:
            extra = [f"{ROOT}/Chassis/Extra{n}" for n in range(self.cfg["extra_chassis"])]
            links["Chassis"] = [ref(self._link("chassis", c)) for c in [c["@odata.id"] for c in links["Chassis"]] + extra]
        if not self.cfg["log_services"]:
            d.pop("LogServices", None)
        d["Boot"].update(self.boot)
        self._show_led(d)
        d["BiosVersion"] = self.firmware.get(self.t.bios_fw, d.get("BiosVersion"))
        d["BootProgress"] = {**d.get("BootProgress", {}), "LastState": "OSRunning" if self.power == "On" else "None"}
        if self.last_reset:
            d["LastResetTime"] = d["BootProgress"]["LastStateTime"] = self.last_reset
        return d

    def _show_led(self, d):
        """The identify LED as the indicator knob shows it on the system and the rack chassis."""
        d.pop("IndicatorLED", None)
        d.pop("LocationIndicatorActive", None)
        if self.cfg["indicator"] != "none":
            d["IndicatorLED"] = self.led
        if self.cfg["indicator"] == "location":
            d["LocationIndicatorActive"] = self.led != "Off"

    def _render_chassis(self, d):
        d["PowerState"] = self.power
        if d["@odata.id"] == self.t.rack:
            self._show_led(d)
        offered = SHAPES[self.cfg["sensor_shapes"]]
        for key, group in SENSOR_LINKS.items():
            if key in d and group not in offered:
                d.pop(key)
                d.pop(key + "@Redfish.Deprecated", None)
            elif key in d:
                d[key] = ref(self._link("sensor_link", d[key]["@odata.id"]))
        links = d.get("Links", {})
        if "Drives" in links:
            links["Drives"] = [ref(self._link("sensor_member", x["@odata.id"])) for x in links["Drives"]]
        return d

    def _render_drive(self, d):
        if "EnvironmentMetrics" in d:
            if "subsystems" in SHAPES[self.cfg["sensor_shapes"]]:
                d["EnvironmentMetrics"] = ref(self._link("sensor_link", d["EnvironmentMetrics"]["@odata.id"]))
            else:
                d.pop("EnvironmentMetrics")
        return d

    def _render_sensor(self, d):
        t, path = self.t, d["@odata.id"]
        if path in t.sensor_views:
            if self.sensor_cache is None:
                self.sensor_cache = sensor_tree(self.sensors, self.limit)
            d = copy.deepcopy(self.sensor_cache[path])
        elif path in t.limit_paths:   # a DMTF tree's limit, from the BMC's state
            limit = self.limit
            if path == t.limit_env:
                shown = {"SetPoint": limit["set_point"], "ControlMode": limit["control_mode"],
                         "AllowableMin": limit["allowable_min"], "AllowableMax": limit["allowable_max"]}
                d["PowerLimitWatts"].update({k: v for k, v in shown.items() if v is not None or k == "SetPoint"})
            if path == t.limit_power:
                d["PowerControl"][0]["PowerLimit"]["LimitInWatts"] = \
                    limit["set_point"] if limit["control_mode"] != "Disabled" else None
        if path == t.limit_power and self.limit:
            limit = d["PowerControl"][0]["PowerLimit"]
            if self.limit.get("exception") is not None:
                limit["LimitException"] = self.limit["exception"]
            if self.cfg["limit_exceptions"]:
                limit["LimitException@Redfish.AllowableValues"] = list(self.cfg["limit_exceptions"])
        if path == t.extra_root and self.cfg["extra_sensors"]:
            d["Members"] += [ref(f"{path}/Extra{n}") for n in range(self.cfg["extra_sensors"])]
            d["Members@odata.count"] = len(d["Members"])
        if isinstance(d.get("Members"), list):
            d["Members"] = [ref(self._link("sensor_member", m["@odata.id"])) for m in d["Members"]]
        for key in SENSOR_PARTS:
            if isinstance(d.get(key), dict) and "@odata.id" in d[key]:
                d[key] = ref(self._link("sensor_link", d[key]["@odata.id"]))
        return d

    def _extra_sensor(self, path):
        """Sensors/Extra<n> of the main chassis while extra_sensors > n (built-in tree), else None."""
        head, _, name = path.rpartition("/")
        if head != self.t.extra_root or not re.fullmatch(r"Extra(0|[1-9][0-9]*)", name) or \
                int(name[5:]) >= self.cfg["extra_sensors"] or self._sensor_hidden(path):
            return None
        n = int(name[5:])
        return {"@odata.id": path, "@odata.type": "#Sensor.v1_9_0.Sensor", "Id": name, "Name": f"Extra {n} Temp",
                "ReadingType": "Temperature", "ReadingUnits": "Cel", "PhysicalContext": "SystemBoard",
                "Reading": 30 + n % 10, "Status": {"State": "Enabled", "Health": "OK"}}

    def _extra_chassis(self, path):
        """Chassis/Extra<n> while extra_chassis > n: a Module without sensors, Oem.Padding of chassis_padding_kb
        KiB of {} elements (what costs a JSON parser most per byte), else None."""
        head, _, name = path.rpartition("/")
        if head != f"{ROOT}/Chassis" or not re.fullmatch(r"Extra(0|[1-9][0-9]*)", name) or \
                int(name[5:]) >= self.cfg["extra_chassis"]:
            return None
        return {"@odata.id": path, "@odata.type": "#Chassis.v1_23_0.Chassis", "Id": name, "Name": f"Extra {name[5:]}",
                "ChassisType": "Module", "Oem": {"Padding": [{}] * (self.cfg["chassis_padding_kb"] * 1024 // 4)}}

    def _render_manager(self, d):
        d.update(FirmwareVersion=self.firmware[self.t.bmc_fw], UUID=self.service_uuid,
                 LastResetTime=self.manager_reset_at)
        if not self.cfg["log_services"]:
            d.pop("LogServices", None)
        return d

    def _log_page(self, uri, query):
        """One page of a log's Entries: $skip/$top, at most log_page_size members, then a nextLink."""
        args = parse_qs(query, keep_blank_values=True)
        bounds = {}
        for key, default in (("$skip", 0), ("$top", None)):
            value = args.get(key, [None])[-1]
            if value is not None and not value.isdigit():
                raise HttpError(400, message("QueryParameterValueTypeError", value, key))
            bounds[key] = int(value) if value is not None else default
        entries, skip, size = self.logs[uri], bounds["$skip"], self.cfg["log_page_size"] or len(self.logs[uri])
        if bounds["$top"] is not None:
            size = min(size, bounds["$top"])
        page = entries[skip:skip + size]
        members = [copy.deepcopy(e) if self.cfg["log_expand"] else ref(e["@odata.id"]) for e in page]
        doc = {**copy.deepcopy(self.t.docs[uri]), "Members": members, "Members@odata.count": len(entries)}
        doc.pop("Members@odata.nextLink", None)
        doc.pop("@odata.nextLink", None)
        if skip + len(page) < len(entries) and page:
            doc["Members@odata.nextLink"] = f"{uri}?$skip={skip + len(page)}"
        return doc

    def _clear_log(self, uri):
        if self._logs_hidden(uri):
            raise not_found(uri)
        self.logs[uri] = []
        self._touch(uri)
        return 204, {}, None

    def _render_bios(self, d):
        d.update(Attributes=dict(self.bios), ResetBiosToDefaultsPending=self.defaults_pending)
        if self.settings_applied:
            d["@Redfish.Settings"].update(self.settings_applied)
        return d

    def _render_settings(self, d):
        d["Attributes"] = {**self.bios, **self.pending}
        return d

    def _render_update(self, d):
        d["MaxImageSizeBytes"] = self.cfg["max_image_bytes"]
        d["MultipartHttpPushUri"] = self._link("push_uri", self.t.push_uri)
        return d

    def _render_firmware(self, d, fid):
        d["Version"] = self.firmware[fid]
        return d

    def _render_nic(self, d):
        for key in ("MACAddress", "PermanentMACAddress"):
            if key in d:
                d[key] = self.mac_prefix + d[key][8:]
        return d

    def _render_account_service(self, d):
        d.update(MinPasswordLength=self.cfg["password_min"], MaxPasswordLength=self.cfg["password_max"])
        return d

    def _render_account(self, d):
        d.update(UserName=self.cfg["user"], Password=None, RoleId="Administrator", Enabled=True, Locked=False,
                 PasswordChangeRequired=self.cfg["password_change_required"])
        actions = d.get("Actions", {})
        actions.pop("#ManagerAccount.ChangePassword", None)   # not served: the password is PATCHed
        if "Actions" in d and not actions:
            d.pop("Actions")
        return d

    def _render_sessions(self, d):
        d["Members"] = [ref(f"{self.t.sessions}/{s['id']}") for s in self.sessions.values()]
        d["Members@odata.count"] = len(d["Members"])
        return d

    def _render_tasks(self, d):
        d["Members"] += [ref(task["doc"]["@odata.id"]) for task in self.tasks.values()]
        d["Members@odata.count"] = len(d["Members"])
        return d

    # -- sessions -----------------------------------------------------------------------------

    def _session_doc(self, session):
        return {"@odata.id": f"{self.t.sessions}/{session['id']}", "@odata.type": "#Session.v1_7_0.Session",
                "Id": session["id"], "Name": "User Session", "UserName": session["user"]}

    def _login(self, headers, body):
        if not self.cfg["sessions"]:
            raise self._not_allowed(self.t.sessions)
        creds = self._json(headers, body)
        if (creds.get("UserName"), creds.get("Password")) != (self.cfg["user"], self.cfg["password"]):
            raise self._unauthorized()
        if self.cfg["session_limit"] and len(self.sessions) >= self.cfg["session_limit"]:
            raise HttpError(503, message("SessionLimitExceeded"))
        token = secrets.token_urlsafe(24)
        self.logins += 1
        session = self.sessions[token] = {"id": secrets.token_hex(8), "user": creds["UserName"], "uses": 0}
        self._touch(self.t.sessions)
        doc = self._session_doc(session)
        if self.cfg["password_change_required"]:
            doc["@Message.ExtendedInfo"] = [message("PasswordChangeRequired", self.t.account)]
        return 201, {"X-Auth-Token": token, "Location": self._link("session_location", doc["@odata.id"])}, doc

    def _logout(self, path):
        token = next((k for k, s in self.sessions.items() if f"{self.t.sessions}/{s['id']}" == path), None)
        if token is None:
            raise not_found(path)
        del self.sessions[token]
        self._touch(self.t.sessions)
        return 204, {}, None

    # -- power and boot -----------------------------------------------------------------------

    def _set_power(self, state):
        if self.power != state:
            self.power = state
            self._touch(self.t.system, *self.t.chassis)

    def _schedule(self, *steps):
        """Replace the pending transitions by `steps` ((state, boot event?) pairs), one power delay apart."""
        due, self.steps = time.monotonic(), []
        for state, boot in steps:
            due += self.cfg["power_delay_s"]
            self.steps.append((due, state, boot))
        self._advance_power()

    def _advance_power(self):
        while self.steps and self.steps[0][0] <= time.monotonic():
            _, state, boot = self.steps.pop(0)
            self._set_power(state)
            if boot:
                self._boot_event()

    def _power_on(self):
        self._set_power("PoweringOn")
        self._schedule(("On", True))

    def _reset(self, body):
        act, reset_type = "ComputerSystem.Reset", body.get("ResetType")
        if reset_type is None:
            raise HttpError(400, message("ActionParameterMissing", act, "ResetType"))
        if reset_type not in self.t.reset_types:
            raise HttpError(400, message("ActionParameterValueNotInList", show(reset_type), "ResetType", act))
        if self.cfg["conflict_when_same"] and (
                (reset_type in ("On", "ForceOn") and self.power == "On") or
                (reset_type in ("ForceOff", "GracefulShutdown") and self.power == "Off")):
            raise HttpError(409, message("ActionParameterValueConflict", "ResetType", reset_type))
        acpi = not self.cfg["ignore_acpi"]
        if reset_type == "Nmi":
            pass                                    # no power change
        elif reset_type == "ForceOff":
            self.steps = []
            self._set_power("Off")
        elif self.power in ("Off", "PoweringOff"):
            if reset_type != "GracefulShutdown":    # every other type powers an off system on
                self._power_on()
        elif reset_type in ("ForceRestart", "PowerCycle"):
            self._power_on()                        # off at once, then PoweringOn -> On
        elif reset_type in ("GracefulShutdown", "PushPowerButton") and acpi:
            self._set_power("PoweringOff")
            self._schedule(("Off", False))
        elif reset_type == "GracefulRestart" and acpi:
            self._set_power("PoweringOff")
            self._schedule(("PoweringOn", False), ("On", True))
        return 204, {}, None

    def _boot_event(self):
        """The host starts: consume the boot override, apply pending BIOS settings and staged firmware."""
        t, at = self.t, now()
        enabled, target = self.boot["BootSourceOverrideEnabled"], self.boot["BootSourceOverrideTarget"]
        self.boots.append({"booted_from": target if enabled != "Disabled" and target != "None" else "Hdd",
                           "mode": self.boot["BootSourceOverrideMode"], "at": at})
        if enabled == "Once":
            self.boot["BootSourceOverrideEnabled"] = "Disabled"
        self.last_reset = at
        self._touch(t.system)
        if self.pending or self.defaults_pending:
            if self.defaults_pending:
                self.bios.update(t.bios_defaults)
            ignore = self.cfg["bios_ignore"]   # accepted, then silently dropped by the BIOS
            self._apply_bios({k: v for k, v in self.pending.items() if k not in ignore})
            self.pending, self.defaults_pending = {}, False
        for fid, version in self.staged.items():
            self.firmware[fid] = version
            self._touch(t.firmware[fid])
        self.staged = {}

    def _apply_bios(self, attributes):
        self.bios.update(attributes)
        self._touch(self.t.bios, self.t.settings)
        self.settings_applied = {"Time": now(), "ETag": self.etag(self.t.bios), "Messages": [message("Success")]}

    def _patch_system(self, body):
        t, doc = self.t, self.t.docs[self.t.system]

        def unwritable(key, container, rel):
            return message("PropertyNotWritable" if key in container else "PropertyUnknown", key, related=rel)

        errors = [unwritable(k, doc, "/" + k) for k in body
                  if k != "Boot" and k not in LED_KEYS and not k.startswith("@")]
        led_errors, led = self._check_led(body)
        errors += led_errors
        boot = body.get("Boot", {})
        if not isinstance(boot, dict):
            errors.append(message("PropertyValueTypeError", show(boot), "Boot", related="/Boot"))
            boot = {}
        for key, value in boot.items():
            rel = "/Boot/" + key
            if key not in BOOT_KEYS:
                errors.append(unwritable(key, doc["Boot"], rel))
            elif not isinstance(value, str):
                errors.append(message("PropertyValueTypeError", show(value), key, related=rel))
            elif value not in t.boot_values[key]:
                errors.append(message("PropertyValueNotInList", value, key, related=rel))
        if errors:
            raise HttpError(400, errors)
        if not boot and led is None:
            raise HttpError(400, message("NoOperation"))
        if led is not None:
            self._set_led(led)
        if not boot:
            return self._get(t.system)
        self.boot.update(boot)
        self._touch(t.system)
        if self.cfg["quirk_legacy"]:     # answers like a Supermicro: 200 + Success, Mode silently Legacy
            self.boot["BootSourceOverrideMode"] = "Legacy"
            return 200, {}, {"@Message.ExtendedInfo": [message("Success")]}
        return self._get(t.system)

    # -- identify LED -------------------------------------------------------------------------

    def _check_led(self, body):
        """(error messages, the IndicatorLED value to set or None) for the LED properties of a PATCH body.
        LocationIndicatorActive true turns an Off LED Blinking and leaves a lit one as it is; false turns it Off."""
        mode, errors, wanted = self.cfg["indicator"], [], []
        for key in LED_KEYS:
            if key not in body:
                continue
            value, rel = body[key], "/" + key
            if mode == "none" or (mode == "legacy" and key == "LocationIndicatorActive"):
                errors.append(message("PropertyUnknown", key, related=rel))
            elif key == "IndicatorLED" and not isinstance(value, str):
                errors.append(message("PropertyValueTypeError", show(value), key, related=rel))
            elif key == "IndicatorLED" and value not in LED_STATES:
                errors.append(message("PropertyValueNotInList", value, key, related=rel))
            elif key == "LocationIndicatorActive" and not isinstance(value, bool):
                errors.append(message("PropertyValueTypeError", show(value), key, related=rel))
            elif key == "IndicatorLED":
                wanted.append(value)
            else:
                wanted.append(("Blinking" if self.led == "Off" else self.led) if value else "Off")
        if not errors and len(wanted) == 2 and (wanted[0] == "Off") != (wanted[1] == "Off"):
            errors.append(message("PropertyValueConflict", "LocationIndicatorActive", "IndicatorLED",
                                  related="/LocationIndicatorActive"))
        return errors, (wanted[0] if wanted else None)   # IndicatorLED, the more precise, first

    def _set_led(self, led):
        self.led_patches += 1
        if led != self.led:
            self.led = led
            self.led_changes += 1
            self._touch(self.t.system, self.t.rack)

    def _patch_rack(self, body):
        """PATCH of the rack chassis: its identify LED only (the system's, the same LED)."""
        doc = self.t.docs[self.t.rack]
        errors = [message("PropertyNotWritable" if k in doc else "PropertyUnknown", k, related="/" + k)
                  for k in body if k not in LED_KEYS and not k.startswith("@")]
        led_errors, led = self._check_led(body)
        errors += led_errors
        if errors:
            raise HttpError(400, errors)
        if led is None:
            raise HttpError(400, message("NoOperation"))
        self._set_led(led)
        return self._get(self.t.rack)

    # -- the account and the manager ------------------------------------------------------------

    def _password_error(self, password):
        """The 400 message for a new password the policy refuses (it never shows the password), or None."""
        low, high, rel = self.cfg["password_min"], self.cfg["password_max"], "/Password"
        if not isinstance(password, str):
            return message("PropertyValueTypeError", MASK, "Password", related=rel)
        if not low <= len(password) <= high:
            msg = message("PropertyValueFormatError", MASK, "Password", related=rel)
            msg["Message"] += f" The password must be {low} to {high} characters."
            return msg
        if self.cfg["password_charset"] == "alnum" and not re.fullmatch(r"[A-Za-z0-9]*", password):
            msg = message("PropertyValueIncorrect", "Password", MASK, related=rel)
            msg["Message"] += " The password may contain letters and digits only."
            return msg
        return None

    def _patch_account(self, body):
        """PATCH of the mock's account: {"Password": new} only. Any error rejects it and changes nothing."""
        t, doc = self.t, self._get(self.t.account)[2]
        errors = [message("PropertyNotWritable" if k in doc else "PropertyUnknown", k, related="/" + k)
                  for k in body if k != "Password" and not k.startswith("@")]
        if "Password" in body:
            errors.append(self._password_error(body["Password"]))
        errors = [e for e in errors if e]
        if errors:
            raise HttpError(400, errors)
        if "Password" not in body:
            raise HttpError(400, message("NoOperation"))
        self.cfg.update(password=body["Password"], password_change_required=False)
        self.password_changes += 1
        self._touch(t.account)
        if self.cfg["drop_sessions_on_password"]:
            for token in [k for k, s in self.sessions.items() if s["user"] == self.cfg["user"]]:
                del self.sessions[token]
            self._touch(t.sessions)
        return self._get(t.account)

    def _manager_reset(self, body):
        """Manager.Reset: 204, then the BMC is unreachable for bmc_reset_s (as unreachable_mode says) and comes
        back without sessions; the host's power is untouched."""
        act, reset_type = "Manager.Reset", body.get("ResetType")
        if reset_type is None:
            raise HttpError(400, message("ActionParameterMissing", act, "ResetType"))
        if reset_type not in self.t.manager_reset_types:
            raise HttpError(400, message("ActionParameterValueNotInList", show(reset_type), "ResetType", act))
        self.manager_resets += 1
        self.manager_reset_at = self._now()
        self.sessions.clear()
        self._touch(self.t.manager, self.t.sessions)
        self.down_until = max(self.down_until, time.monotonic() + self.cfg["bmc_reset_s"])
        return 204, {"Connection": "close"}, None

    # -- BIOS ---------------------------------------------------------------------------------

    def _patch_settings(self, body):
        """Validate everything first and reject the whole PATCH on any error (DSP0266 allows either)."""
        t = self.t
        errors = [message("PropertyUnknown", k, related="/" + k) for k in body
                  if k not in ("Attributes", "@Redfish.SettingsApplyTime") and not k.startswith("@odata")]
        attributes = body.get("Attributes")
        if attributes is None:
            errors.append(message("PropertyMissing", "Attributes", related="/Attributes"))
        elif not isinstance(attributes, dict):
            errors.append(message("PropertyValueTypeError", show(attributes), "Attributes", related="/Attributes"))
        else:
            errors += filter(None, (t.check_attribute(n, v) for n, v in attributes.items()))
        apply = body.get("@Redfish.SettingsApplyTime", {"ApplyTime": "OnReset"})
        when = apply.get("ApplyTime") if isinstance(apply, dict) else None
        if when not in t.apply_times:
            errors.append(message("PropertyValueNotInList", show(when), "ApplyTime",
                                  related="/@Redfish.SettingsApplyTime/ApplyTime"))
        if errors:
            raise HttpError(400, errors)
        if not attributes:
            raise HttpError(400, message("NoOperation"))
        if when == "Immediate":
            for name in attributes:
                self.pending.pop(name, None)
            self._apply_bios(attributes)
        else:
            self.pending.update(attributes)
            self._touch(t.settings)
        return self._get(t.settings)

    def _reset_bios(self, body):
        self.defaults_pending = True
        self._touch(self.t.bios)
        return 204, {}, None

    # -- sensors and the power limit ----------------------------------------------------------

    def _sensor_path(self, path):
        return self.t.is_sensor_path(path)

    def _sensor_hidden(self, path):
        """Whether path is a sensor resource that sensor_shapes does not offer (it answers 404)."""
        offered = SHAPES[self.cfg["sensor_shapes"]]
        return any(path == r or path.startswith(r + "/")
                   for group, roots in self.t.sensor_roots.items() if group not in offered for r in roots)

    def _sensors_changed(self):
        self.sensor_cache = None
        self._touch(*self.t.sensor_views, *self.t.limit_paths)

    def _set_sensor(self, spec):
        """POST /__mock/sensor {id, name?, reading?, health?, thresholds?}: reading is any JSON value (absurd
        ones included); health OK, Warning, Critical or null (none given); thresholds {name: value, null drops
        it}; name any string (shown by every shape, a PSU's own resources keep theirs)."""
        sid = spec.get("id")
        if sid not in self.sensors:
            raise HttpError(400, message("PropertyValueNotInList", show(sid), "id"))
        sensor = self.sensors[sid]
        if "health" in spec and spec["health"] is not None and spec["health"] not in LOG_SEVERITIES:
            raise HttpError(400, message("PropertyValueNotInList", show(spec["health"]), "health"))
        thresholds = spec.get("thresholds", {})
        if not isinstance(thresholds, dict) or not set(thresholds) <= set(THRESHOLDS):
            raise HttpError(400, message("PropertyValueNotInList", show(thresholds), "thresholds"))
        if not isinstance(spec.get("name", ""), str):
            raise HttpError(400, message("PropertyValueTypeError", show(spec["name"]), "name"))
        for key in ("name", "reading", "health"):
            if key in spec:
                sensor[key] = spec[key]
        for key, value in thresholds.items():
            if value is None:
                sensor["thresholds"].pop(key, None)
            else:
                sensor["thresholds"][key] = value
        self._sensors_changed()
        return {"id": sid, **copy.deepcopy(sensor)}

    def _set_limit(self, spec):
        """POST /__mock/power_limit {set_point?, control_mode?, allowable_min?, allowable_max?}: the limit
        changed behind the client's back."""
        if self.limit is None:
            raise HttpError(400, message("PropertyUnknown", "power_limit"))
        for key, value in spec.items():
            if key not in self.limit:
                raise HttpError(400, message("PropertyUnknown", key))
            if key == "control_mode" and value not in CONTROL_MODES:
                raise HttpError(400, message("PropertyValueNotInList", show(value), key))
            if key == "exception" and value not in LIMIT_EXCEPTIONS and value is not None:
                raise HttpError(400, message("PropertyValueNotInList", show(value), key))
            if key not in ("control_mode", "exception") and value is not None and \
                    (not isinstance(value, (int, float)) or isinstance(value, bool)):
                raise HttpError(400, message("PropertyValueTypeError", show(value), key))
        self.limit.update(spec)
        self._sensors_changed()
        return dict(self.limit)

    def _check_watts(self, value, name, rel):
        """The error message for a limit value, or None when it can be set."""
        low, high = self.limit["allowable_min"], self.limit["allowable_max"]
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return message("PropertyValueTypeError", show(value), name, related=rel)
        if (low is not None and value < low) or (high is not None and value > high):
            return message("PropertyValueOutOfRange", show(value), name, related=rel)
        return None

    def _patch_limit_env(self, body):
        """PATCH EnvironmentMetrics {PowerLimitWatts: {SetPoint?, ControlMode?}}; any error rejects it all."""
        doc, errors = self.t.docs[self.t.limit_env], []
        errors += [message("PropertyNotWritable" if k in doc else "PropertyUnknown", k, related="/" + k)
                   for k in body if k != "PowerLimitWatts" and not k.startswith("@")]
        limit = body.get("PowerLimitWatts", {})
        if not isinstance(limit, dict):
            errors.append(message("PropertyValueTypeError", show(limit), "PowerLimitWatts", related="/PowerLimitWatts"))
            limit = {}
        for key, value in limit.items():
            rel = "/PowerLimitWatts/" + key
            if key == "SetPoint":
                errors.append(self._check_watts(value, "SetPoint", rel))
            elif key == "ControlMode":
                if value not in CONTROL_MODES:
                    errors.append(message("PropertyValueNotInList", show(value), key, related=rel))
            else:
                errors.append(message("PropertyNotWritable" if key in doc["PowerLimitWatts"] else "PropertyUnknown",
                                      key, related=rel))
        errors = [e for e in errors if e]
        if not errors and limit.get("ControlMode", "Disabled") != "Disabled" and \
                limit.get("SetPoint", self.limit["set_point"]) is None:
            errors.append(message("PropertyMissing", "SetPoint", related="/PowerLimitWatts/SetPoint"))
        if errors:
            raise HttpError(400, errors)
        if not limit:
            raise HttpError(400, message("NoOperation"))
        if "SetPoint" in limit:
            self.limit["set_point"] = limit["SetPoint"]
        if "ControlMode" in limit:
            self.limit["control_mode"] = limit["ControlMode"]
        self._sensors_changed()
        return self._get(self.t.limit_env)

    def _patch_limit_power(self, body):
        """PATCH Power {PowerControl: [{PowerLimit: {LimitInWatts}}, {}...]} (deprecated); null removes the
        limit, a number sets it and turns it on."""
        rel = "/PowerControl/0/PowerLimit/LimitInWatts"
        controls = body.get("PowerControl")
        errors = [message("PropertyNotWritable", k, related="/" + k) for k in body
                  if k != "PowerControl" and not k.startswith("@")]
        first = controls[0] if isinstance(controls, list) and controls else None
        if not isinstance(first, dict) or any(c != {} for c in controls[1:]) or \
                set(first) - {"PowerLimit", "MemberId", "@odata.id"} or not isinstance(first.get("PowerLimit"), dict):
            errors.append(message("PropertyValueTypeError", show(controls), "PowerControl", related="/PowerControl"))
        else:
            limit = first["PowerLimit"]
            for key in set(limit) - {"LimitInWatts", "LimitException", "CorrectionInMs"}:
                errors.append(message("PropertyUnknown", key, related="/PowerControl/0/PowerLimit/" + key))
            if "LimitInWatts" not in limit:
                errors.append(message("PropertyMissing", "LimitInWatts", related=rel))
            elif limit["LimitInWatts"] is not None:
                errors.append(self._check_watts(limit["LimitInWatts"], "LimitInWatts", rel))
            if "LimitException" in limit and limit["LimitException"] not in \
                    (self.cfg["limit_exceptions"] or LIMIT_EXCEPTIONS):
                errors.append(message("PropertyValueNotInList", show(limit["LimitException"]), "LimitException",
                                      related="/PowerControl/0/PowerLimit/LimitException"))
        errors = [e for e in errors if e]
        if errors:
            raise HttpError(400, errors)
        watts = first["PowerLimit"]["LimitInWatts"]
        if "LimitException" in first["PowerLimit"]:
            self.limit["exception"] = first["PowerLimit"]["LimitException"]
        if watts is None:
            self.limit["control_mode"] = "Disabled"
        else:
            self.limit["set_point"] = watts
            if self.limit["control_mode"] == "Disabled":
                self.limit["control_mode"] = "Automatic"
        self._sensors_changed()
        return self._get(self.t.limit_power)

    # -- firmware -----------------------------------------------------------------------------

    def _targets(self, targets, image, act):
        """SoftwareInventory Ids to update. Without Targets, the image's name picks them
        ('gpu_x.bin' -> every updateable GPUn), as a BMC would from the image's header."""
        t = self.t
        if not targets:
            family = image_stem(image).rpartition("_")[0].lower()
            found = [f for f in t.firmware if t.updateable[f] and f.rstrip("0123456789").lower() == family]
            if not found:
                raise HttpError(400, message("ActionParameterMissing", act, "Targets"))
            return found
        if not isinstance(targets, list) or not all(isinstance(x, str) for x in targets):
            raise HttpError(400, message("ActionParameterValueTypeError", show(targets), "Targets", act))
        found = []
        for uri in targets:
            fid = t.firmware_by_uri.get(uri.rstrip("/"))
            if fid is None or not t.updateable[fid]:
                raise HttpError(400, message("ActionParameterValueNotInList", uri, "Targets", act))
            found.append(fid)
        return list(dict.fromkeys(found))

    def _simple_update(self, body):
        act, uri = "UpdateService.SimpleUpdate", body.get("ImageURI")
        if uri is None:
            raise HttpError(400, message("ActionParameterMissing", act, "ImageURI"))
        if not isinstance(uri, str):
            raise HttpError(400, message("ActionParameterValueTypeError", show(uri), "ImageURI", act))
        protocol = body.get("TransferProtocol")
        if protocol is not None and protocol not in self.t.protocols:
            raise HttpError(400, message("ActionParameterValueNotInList", show(protocol), "TransferProtocol", act))
        image = unquote(urlsplit(uri).path).rpartition("/")[2]
        if not image:
            raise HttpError(400, message("ActionParameterValueFormatError", uri, "ImageURI", act))
        return self._start_update(image, self._targets(body.get("Targets"), image, act))

    def _push(self, headers, body):
        ctype = headers.get("Content-Type", "")
        if not ctype.lower().startswith("multipart/form-data"):
            raise HttpError(415, message("HeaderInvalid", "Content-Type: " + ctype))
        parts = parse_multipart(ctype, body)
        params, (filename, data) = parts.get("UpdateParameters"), parts.get("UpdateFile", (None, None))
        try:
            params = json.loads(params[1]) if params else None
        except ValueError:
            params = None
        if not isinstance(params, dict) or not filename:
            raise HttpError(400, message("MissingOrMalformedPart"))
        if len(data) > self.cfg["max_image_bytes"]:
            raise HttpError(413, message("PayloadTooLarge"))
        image = filename.replace("\\", "/").rpartition("/")[2]
        return self._start_update(image, self._targets(params.get("Targets"), image, "MultipartHttpPushUri"))

    def _start_update(self, image, targets):
        if any(task["doc"]["TaskState"] not in TERMINAL for task in self.tasks.values()):
            raise HttpError(503, message("UpdateInProgress"), {"Retry-After": "1"})
        tid = str(self.next_task)
        self.next_task += 1
        monitor = f"{self.t.monitors}/{tid}"
        task = self.tasks[tid] = {"image": image, "version": image_version(image), "targets": targets, "step": 0,
                                  "doc": {"@odata.id": f"{self.t.tasks}/{tid}", "@odata.type": "#Task.v1_7_4.Task",
                                          "Id": tid, "Name": f"Firmware update with {image}", "TaskState": "New",
                                          "TaskStatus": "OK", "PercentComplete": 0, "StartTime": self._now(),
                                          "TaskMonitor": monitor, "Messages": []}}
        self._touch(self.t.tasks)
        return 202, {"Location": self._link("task_monitor", monitor)}, self._task_doc(task)

    def _task_doc(self, task):
        return {**task["doc"], "Messages": list(task["doc"]["Messages"]),
                "TaskMonitor": self._link("task_monitor", task["doc"]["TaskMonitor"])}

    # Per poll: (TaskState, PercentComplete, Update message key) until Completed.
    PROGRESS = [("Running", 0, None), ("Running", 25, "TransferringToComponent"),
                ("Running", 50, "VerifyingAtComponent"), ("Running", 75, "ApplyingOnComponent"),
                ("Running", 100, None)]

    def _advance_task(self, task):
        doc = task["doc"]
        if doc["TaskState"] in TERMINAL:
            return
        step, image, names = task["step"], task["image"], ", ".join(task["targets"])
        task["step"] += 1
        self._touch(doc["@odata.id"])
        if step == len(self.PROGRESS):
            self._finish_update(task)
            return
        doc["TaskState"], doc["PercentComplete"], key = self.PROGRESS[step]
        if step == 0:
            doc["Messages"].append(message("TaskStarted", doc["Id"]))
        if key:
            doc["Messages"].append(message(key, image, names))
        if key == "VerifyingAtComponent" and "bad" in image.lower():
            doc.update(TaskState="Exception", TaskStatus="Critical", EndTime=self._now())
            doc["Messages"] += [message("VerificationFailed", image, names), message("TaskAborted", doc["Id"])]

    def _finish_update(self, task):
        t, doc, image = self.t, task["doc"], task["image"]
        doc.update(TaskState="Completed", EndTime=self._now())
        for fid in task["targets"]:
            self.update_count[fid] += 1
            if fid == t.bios_fw:         # activates at the next boot event
                self.staged[fid] = task["version"]
                doc["Messages"] += [message("AwaitToActivate", image, fid),
                                    message("ResetRequired", t.reset_target, "ForceRestart")]
            else:
                self.firmware[fid] = task["version"]
                self._touch(t.firmware[fid])
                doc["Messages"].append(message("UpdateSuccessful", fid, image))
        doc["Messages"].append(message("TaskCompletedOK", doc["Id"]))
        if t.bmc_fw in task["targets"]:  # the BMC reboots into the new image
            self._touch(t.manager, t.sessions)
            self.unavailable = self.cfg["bmc_reboot_requests"]
            self.sessions.clear()


class StaticBmc:
    """--static: a DMTF tree served as-is. GET/HEAD only; any credentials, or none, are accepted."""

    def __init__(self, docs):
        self.docs = docs

    def delay(self):
        return 0

    def max_body(self):
        return 1 << 20

    def refusing(self):
        return False

    def handle(self, method, path, headers, body, query=""):
        if method not in ("GET", "HEAD"):
            return HttpError(405, message("OperationNotAllowed"), {"Allow": "GET, HEAD"}).response()
        data = self.docs.get(path)
        if data is None:
            return not_found(path).response()
        ctype = "application/xml" if path.endswith("/$metadata") else "application/json; charset=utf-8"
        return 200, {"Content-Type": ctype}, data

    def control(self, method, path, headers, body):
        return not_found(path).response()


# ---------------------------------------------------------------------------------------------
# HTTP plumbing
# ---------------------------------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "RackpilotMockBMC/1.0"
    timeout = 300
    disable_nagle_algorithm = True   # headers and body go out in two writes

    def log_message(self, fmt, *args):
        pass

    def version_string(self):
        return self.server_version

    def date_time_string(self, timestamp=None):   # the Date header, on the BMC's own clock
        skew = getattr(self.server.app, "skew", None)
        return formatdate((timestamp or time.time()) + (skew() if skew else 0), usegmt=True)

    def serve(self):
        app = self.server.app
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower() or length < 0:
            self.close_connection = True
            return self.send(411, {}, b"")
        if length > app.max_body():
            self.close_connection = True
            return self.send(*HttpError(413, message("PayloadTooLarge")).response())
        body = self.rfile.read(length)
        url = urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        try:
            if path.startswith("/__mock/"):
                response = app.control(self.command, path, self.headers, body)
            else:
                if app.delay():
                    time.sleep(app.delay())
                response = app.handle(self.command, path, self.headers, body, url.query)
        except Drop:           # an injected fault: no answer at all
            self.close_connection = True
            return
        except Hold as hold:   # an injected fault: the change is made, the answer comes late
            time.sleep(hold.seconds)   # this connection's own thread; the BMC's lock is free
            response = hold.response
        except Exception:      # a bug in the mock: report it to the client and on stderr
            traceback.print_exc()
            response = HttpError(500, message("InternalError")).response()
        self.send(*response)

    do_GET = do_HEAD = do_POST = do_PATCH = do_PUT = do_DELETE = serve

    def send(self, status, headers, payload):
        headers = dict(headers)
        if payload is None:
            data = b""
        elif isinstance(payload, bytes):
            data = payload
        else:
            data = json.dumps(payload).encode()
            headers.setdefault("Content-Type", "application/json; charset=utf-8")
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("OData-Version", "4.0")
        if status != 204:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD" and status != 204:
            self.wfile.write(data)


class Server(ThreadingHTTPServer):
    """One listening port = one BMC. Each connection gets a daemon thread (TLS handshake included)."""
    daemon_threads = True
    block_on_close = False
    request_queue_size = 128

    def __init__(self, address, app, ssl_context):
        self.app, self.ssl_context = app, ssl_context
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, Handler)

    def server_bind(self):   # HTTPServer's version does a reverse DNS lookup per port
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]

    def finish_request(self, request, client_address):
        if self.ssl_context is None:
            return super().finish_request(request, client_address)
        request.settimeout(30)
        try:
            conn = self.ssl_context.wrap_socket(request, server_side=True)
        except OSError:
            return
        try:
            super().finish_request(conn, client_address)
        finally:
            conn.close()

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], OSError):   # client hang-ups are normal
            super().handle_error(request, client_address)


def main():
    ap = argparse.ArgumentParser(description="Stateful Redfish mock BMCs for Rackpilot's tests.")
    ap.add_argument("--port-base", type=int, default=18000, help="BMC i listens on PORT_BASE + i")
    ap.add_argument("--count", type=int, default=1, help="number of BMCs (default 1)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"), help="serve HTTPS with this PEM cert and key")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--tree", metavar="DIR", help="stateful, on a DMTF mockup tree instead of the built-in one")
    mode.add_argument("--static", metavar="DIR", help="serve a DMTF mockup tree as-is (GET only)")
    ap.add_argument("--user", default=DEFAULTS["user"])
    ap.add_argument("--password", default=DEFAULTS["password"])
    ap.add_argument("--serial-prefix", default="MOCK", help="BMC i's SerialNumber is PREFIX + i as 4 digits")
    ap.add_argument("--ready-file", metavar="PATH", help="written once every port listens")
    args = ap.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if args.static:
        docs = load_tree(args.static, raw=True)
        apps = [StaticBmc(docs) for _ in range(args.count)]
    else:
        try:
            tree = Tree(load_tree(args.tree)) if args.tree else Tree(builtin_tree(), builtin=True)
        except (KeyError, IndexError) as e:
            sys.exit(f"mock_bmc: {args.tree} lacks a resource or property the mock needs: {e!r}")
        config = dict(DEFAULTS, user=args.user, password=args.password)
        apps = [Bmc(tree, i, f"{args.serial_prefix}{i:04d}", config) for i in range(args.count)]
    context = None
    if args.tls:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*args.tls)
    servers = []
    for i, app in enumerate(apps):
        try:
            servers.append(Server((args.host, args.port_base + i), app, context))
        except OSError as e:
            sys.exit(f"mock_bmc: cannot listen on {args.host}:{args.port_base + i}: {e}")

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    selector = selectors.DefaultSelector()
    for server in servers:
        selector.register(server, selectors.EVENT_READ)
    try:
        if args.ready_file:
            with open(args.ready_file + ".tmp", "w") as f:
                json.dump({"pid": os.getpid(), "port_base": args.port_base, "count": args.count,
                           "scheme": "https" if args.tls else "http"}, f)
            os.replace(args.ready_file + ".tmp", args.ready_file)
        print("ready", flush=True)
        closed = set()
        while True:   # one thread accepts on every port; requests run in per-connection threads
            for key, _ in selector.select(0.05):
                key.fileobj._handle_request_noblock()
            for server in servers:   # an unreachable BMC ("refuse") stops listening meanwhile
                refusing = server.app.refusing()
                if refusing and server not in closed:
                    selector.unregister(server)
                    server.socket.close()
                    closed.add(server)
                elif not refusing and server in closed:
                    server.socket = socket.socket(server.address_family, socket.SOCK_STREAM)
                    try:
                        server.server_bind()
                        server.server_activate()
                    except OSError:  # the port is briefly someone's source port: next tick
                        server.socket.close()
                        continue
                    selector.register(server, selectors.EVENT_READ)
                    closed.discard(server)
    except KeyboardInterrupt:
        pass
    finally:
        if args.ready_file and os.path.exists(args.ready_file):
            os.remove(args.ready_file)


if __name__ == "__main__":
    main()
