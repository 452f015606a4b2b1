"""JSON Schemas of yunikorn-core's ``pkg/webservice/dao`` structs, written by hand from the Go source
(field names from the ``json`` tags, types from the Go types).

Go's encoder decides what a client sees, so each schema says it exactly:

* a field without ``omitempty`` is **required**;
* a field with ``omitempty`` is optional, and when present it is **not empty** (Go leaves out ``""``,
  ``0``, ``false``, nil and empty maps and slices) — so a response that sends ``"reason": ""`` or
  ``"allocations": []`` fails, as a Go client would see a different body from YuniKorn's;
* a struct value is always encoded, even with ``omitempty`` (``resourceHistory``, ``capacity``);
* no other field is allowed (``additionalProperties: false``), so a misspelt name fails;
* ``int64``/``uint64`` are integers, ``priority`` is a string, resources are maps of integers.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

INT: Schema = {"type": "integer"}
STR: Schema = {"type": "string"}
BOOL: Schema = {"type": "boolean"}
RES: Schema = {"type": "object", "additionalProperties": INT}
STRMAP: Schema = {"type": "object", "additionalProperties": STR}
STRS: Schema = {"type": "array", "items": STR}


def arr(items: Schema) -> Schema:
    """A Go slice (``null`` when nil and not omitted)."""
    return {"type": "array", "items": items}


def _nonempty(s: Schema) -> Schema:
    t = s.get("type")
    if t == "string":
        return {**s, "minLength": 1}
    if t == "integer":
        return {**s, "not": {"const": 0}}
    if t == "boolean":
        return {"const": True}
    if t == "object" and "properties" not in s:
        return {**s, "minProperties": 1}
    if t == "array":
        return {**s, "minItems": 1}
    return s


def obj(required: dict[str, Schema], omitempty: dict[str, Schema] | None = None,
        structs: dict[str, Schema] | None = None) -> Schema:
    """A Go struct: ``required`` (no omitempty), ``omitempty`` (absent or non-empty), ``structs``
    (struct values under omitempty: always present)."""
    props = {**required, **(structs or {}), **{k: _nonempty(v) for k, v in (omitempty or {}).items()}}
    return {"type": "object", "properties": props, "required": sorted([*required, *(structs or {})]),
            "additionalProperties": False}


ALLOCATION = obj({"allocationKey": STR}, {
    "allocationTags": STRMAP, "requestTime": INT, "allocationTime": INT, "allocationDelay": INT,
    "resource": RES, "priority": STR, "nodeId": STR, "applicationId": STR, "placeholder": BOOL,
    "placeholderUsed": BOOL, "taskGroupName": STR, "preempted": BOOL, "originator": BOOL})

FOREIGN_ALLOCATION = obj({"allocationKey": STR}, {
    "allocationTags": STRMAP, "allocationTime": INT, "resource": RES, "priority": STR, "nodeId": STR,
    "preemptable": BOOL})

ASK_LOG = obj({}, {"message": STR, "lastOccurrence": INT, "count": INT})

ASK = obj({"allocationKey": STR}, {
    "allocationTags": STRMAP, "requestTime": INT, "resource": RES, "priority": STR, "requiredNodeId": STR,
    "applicationId": STR, "placeholder": BOOL, "taskGroupName": STR, "allocationLog": arr(ASK_LOG),
    "triggeredPreemption": BOOL, "originator": BOOL, "schedulingAttempted": BOOL, "triggeredScaleUp": BOOL})

STATE = obj({}, {"time": INT, "applicationState": STR})
PLACEHOLDER = obj({}, {"taskGroupName": STR, "count": INT, "minResource": RES, "replaced": INT,
                       "timedout": INT})
RESOURCE_HISTORY = obj({}, {"resourceUsage": {"type": "object"}, "preemptedResource": {"type": "object"},
                            "placeholderResource": {"type": "object"}})

APPLICATION = obj(
    {"applicationID": STR, "partition": STR, "queueName": STR},
    {"usedResource": RES, "maxUsedResource": RES, "pendingResource": RES, "submissionTime": INT,
     "finishedTime": INT, "requests": arr(ASK), "allocations": arr(ALLOCATION), "applicationState": STR,
     "user": STR, "groups": STRS, "rejectedMessage": STR, "stateLog": arr(STATE),
     "placeholderData": arr(PLACEHOLDER), "hasReserved": BOOL, "reservations": STRS,
     "maxRequestPriority": INT, "startTime": INT, "backoffDeadline": STR},
    {"resourceHistory": RESOURCE_HISTORY})

NODE = obj({"nodeID": STR, "schedulable": BOOL, "isReserved": BOOL}, {
    "hostName": STR, "rackName": STR, "attributes": STRMAP, "capacity": RES, "allocated": RES,
    "occupied": RES, "available": RES, "utilized": RES, "allocations": arr(ALLOCATION),
    "foreignAllocations": arr(FOREIGN_ALLOCATION), "reservations": STRS})

CLUSTER = obj({"partition": STR, "clusterName": STR}, {"startTime": INT,
                                                        "rmBuildInformation": arr(STRMAP)})

_WEIGHTS: Schema = {"type": "object", "additionalProperties": {"type": "number"}}
PARTITION = obj(
    {"clusterId": STR, "name": STR, "preemptionEnabled": BOOL, "quotaPreemptionEnabled": BOOL},
    {"totalNodes": INT, "applications": {"type": "object", "additionalProperties": INT},
     "totalContainers": INT, "state": STR, "lastStateTransitionTime": INT},
    {"capacity": obj({}, {"capacity": RES, "usedCapacity": RES, "utilization": RES}),
     "nodeSortingPolicy": obj({}, {"type": STR, "resourceWeights": _WEIGHTS})})

FILTER = obj({"type": STR}, {"userList": STRS, "groupList": STRS, "userExp": STR, "groupExp": STR})
RULE: Schema = obj({"name": STR}, {"parameters": STRMAP, "filter": FILTER,
                                   "parentRule": {"$ref": "#/$defs/rule"}})
RULES: Schema = {"$defs": {"rule": RULE}, **arr({"$ref": "#/$defs/rule"})}

APP_HISTORY = obj({}, {"timestamp": INT, "totalApplications": STR})
CONTAINER_HISTORY = obj({}, {"timestamp": INT, "totalContainers": STR})

NODE_UTIL = obj({}, {"bucketName": STR, "numOfNodes": INT, "nodeNames": STRS})
NODES_UTIL = obj({}, {"type": STR, "utilization": arr(NODE_UTIL)})
PARTITION_NODES_UTIL = obj({"clusterId": STR, "partition": STR}, {"utilizations": arr(NODES_UTIL)})

TEMPLATE = obj({}, {"maxApplications": INT, "maxResource": RES, "guaranteedResource": RES,
                    "properties": STRMAP})
QUEUE: Schema = obj(
    {"queuename": STR, "partition": STR, "isLeaf": BOOL, "isManaged": BOOL, "currentPriority": INT,
     "prioritySorting": BOOL, "preemptionEnabled": BOOL, "isPreemptionFence": BOOL, "isPriorityFence": BOOL},
    {"status": STR, "pendingResource": RES, "maxResource": RES, "guaranteedResource": RES,
     "allocatedResource": RES, "preemptingResource": RES, "headroom": RES, "properties": STRMAP,
     "parent": STR, "template": TEMPLATE, "children": arr({"$ref": "#/$defs/queue"}), "childNames": STRS,
     "absUsedCapacity": RES, "maxRunningApps": INT, "runningApps": INT, "allocatingAcceptedApps": STRS,
     "sortingPolicy": STR, "preemptionDelay": STR, "quotaPreemptionDelay": STR, "priorityOffset": INT})
QUEUE_TREE: Schema = {"$defs": {"queue": QUEUE}, "$ref": "#/$defs/queue"}

USAGE: Schema = obj({"queuePath": STR}, {
    "resourceUsage": RES, "runningApplications": STRS, "maxResources": RES, "maxApplications": INT,
    "children": arr({"$ref": "#/$defs/usage"})})
USER_USAGE: Schema = {"$defs": {"usage": USAGE},
                      **obj({"userName": STR}, {"groups": STRMAP, "queues": {"$ref": "#/$defs/usage"}})}
GROUP_USAGE: Schema = {"$defs": {"usage": USAGE},
                       **obj({"groupName": STR}, {"applications": STRS, "queues": {"$ref": "#/$defs/usage"}})}

HEALTH_CHECK = obj({"Succeeded": BOOL}, {"Name": STR, "Description": STR, "DiagnosisMessage": STR})
HEALTH = obj({"Healthy": BOOL}, {"HealthChecks": arr(HEALTH_CHECK)})

VALIDATE = obj({"allowed": BOOL}, {"reason": STR})

ERROR = obj({"status_code": INT}, {"message": STR, "description": STR})

_QUANTITY = obj({}, {"value": INT})
EVENT_RECORD = obj({}, {"type": INT, "objectID": STR, "message": STR, "timestampNano": INT,
                        "eventChangeType": INT, "eventChangeDetail": INT, "referenceID": STR,
                        "resource": obj({}, {"resources": {"type": "object",
                                                           "additionalProperties": _QUANTITY}})})
EVENT_BATCH = obj({"InstanceUUID": STR, "LowestID": INT, "HighestID": INT,
                   "EventRecords": {"anyOf": [{"type": "null"}, arr(EVENT_RECORD)]}})
STREAM_HELLO = obj({"InstanceUUID": STR})

#: ``ConfigDAOInfo`` (config structs have YAML tags only: Go field names as JSON keys)
_CONFIG_PARTITION: Schema = {"type": "object", "required": [
    "Name", "Queues", "Preemption", "NodeSortPolicy", "UserGroupResolver"]}
CONFIG: Schema = {
    "type": "object",
    "properties": {"Partitions": {"anyOf": [{"type": "null"}, arr(_CONFIG_PARTITION)]},
                   "Checksum": {"type": "string", "minLength": 1}, "Extra": STRMAP,
                   "DeadlockDetectionEnabled": BOOL, "DeadlockTimeoutSeconds": INT},
    "required": ["Partitions", "DeadlockDetectionEnabled", "DeadlockTimeoutSeconds"],
    "additionalProperties": False,
}
