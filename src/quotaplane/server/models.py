"""Request bodies and documented response shapes of the REST service.

Request bodies are pydantic models so that a wrong type, a missing field or an amount outside int64
is a 400 with a sentence naming the field (decision S3). Amounts are strict JSON integers in
``[0, 2**63-1]``: ``"5"``, ``5.0``, ``true``, negative or overflowing amounts are refused.

Response models document ``/openapi.json``; handlers build their JSON directly (the shapes come from
the engines' ``dao``/``to_dict`` methods), so these models only describe them.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, StrictStr
from pydantic_core import PydanticCustomError

from quotaplane.config.identity import NAME_PATTERN, check_name
from quotaplane.resources import INT64_MAX
from quotaplane.units import internal_unit, parse_resources

__all__ = [
    "AllocationBody",
    "AllocationDaoOut",
    "AllocationNodeBody",
    "Amount",
    "ApplicationBody",
    "ApplicationDaoOut",
    "BatchBody",
    "ClusterOut",
    "EventBatchOut",
    "MaxRuntime",
    "NodeBody",
    "Placement",
    "ResourceMap",
    "WhatIfBody",
    "amount_message",
]

#: YuniKorn's rules for queue paths, user and group names (reference Appendix B), as ECMA regexes for
#: the OpenAPI document (``$`` is the end), so what it calls valid is served (issue 32 item 11)
QUEUE_PATTERN = r"^[a-zA-Z0-9_:#/@-]{1,64}(\.[a-zA-Z0-9_:#/@-]{1,64})*$"
USER_PATTERN = r"^[_a-zA-Z][a-zA-Z0-9:#/_.@-]*[$]?$"
GROUP_PATTERN = r"^[_a-zA-Z][a-zA-Z0-9:_.-]*$"


def _integer(value: Any) -> Any:
    # JSON Schema's "integer" includes 2.0 (a number with a zero fraction): accept it as 2. Refuse
    # booleans, strings and fractions (pydantic's lax mode would turn "5" into 5).
    if type(value) is int:          # the common case first: every priority of every request
        return value
    return _integral(value, "integer_type")


def _amount(value: Any) -> Any:
    # as _integer; its error type lets the 400 name the resource's unit (amount_message)
    if type(value) is int:          # the common case first: every amount of every request
        return value
    return _integral(value, "amount_type")


def _integral(value: Any, kind: str) -> int:
    """``value`` (not an int) as an integer if it is a float with a zero fraction; else the error."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise PydanticCustomError(kind, "{shown} is not an integer", {"shown": _shown(value)})


def _shown(value: Any) -> str:
    """``value`` as the client wrote it in JSON (``"4Gi"``, ``true``, ``1.5``), cut when long."""
    try:
        text = json.dumps(value)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def amount_message(resource: str, value: Any) -> str:
    """The 400 sentence for a resource amount that is not an integer: the value, the unit the API
    wants and, when the value reads as a quantity, the integer to send — ``"4Gi" is not an integer:
    memory is a JSON integer of bytes ("4Gi" is 4294967296)``. Only on the error path."""
    unit = internal_unit(resource)
    wanted = "a JSON integer count" if unit == "count" else f"a JSON integer of {unit}"
    text = f"{_shown(value)} is not an integer: {resource} is {wanted}"
    hint = _as_integer(resource, value)
    return f"{text} ({hint})" if hint else text


def _as_integer(resource: str, value: Any) -> str | None:
    """What ``value`` is in ``resource``'s internal units, when it reads as a quantity."""
    if isinstance(value, str):
        try:
            parsed = parse_resources([f"{resource}={value}"])
        except ValueError:
            return None
        return f"{_shown(value)} is {parsed[resource]}" if resource in parsed else None
    if resource == "vcore" and isinstance(value, float) and (value * 1000).is_integer():
        return f"{value:g} cores is {int(value * 1000)}"       # cores written where milli-cores go
    return None


def _number(value: Any) -> Any:
    # a JSON number (integer or fraction); strings and booleans are refused (lax mode would take "5")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a number of seconds")
    return value


#: A resource amount: a JSON integer within int64, never negative in a request.
Amount = Annotated[int, Field(ge=0, le=INT64_MAX), BeforeValidator(_amount)]
#: A priority: YuniKorn priorities are int32.
Priority = Annotated[int, Field(ge=-(2**31), le=2**31 - 1), BeforeValidator(_integer)]
#: A non-empty name (ids, users, resource names).
def _printable(value: str) -> str:
    # printable ASCII (nearly every name) holds none of the characters check_name refuses: no search
    if value.isascii() and value.isprintable():
        return value
    return check_name(value, "name")


#: an id or name: 1 to 1,024 characters, none of them a control or invisible one (issue 14 #8)
Name = Annotated[StrictStr, Field(min_length=1, max_length=1024, json_schema_extra={"pattern": NAME_PATTERN}),
                 AfterValidator(_printable)]
#: ``{resource name: amount}`` in internal units (vcore milli, memory bytes).
#: a resource name (a map key: the schema cannot say more than its length)
ResourceName = Annotated[StrictStr, Field(min_length=1, max_length=1024)]
ResourceMap = dict[ResourceName, Amount]
#: YuniKorn's ``allocationTags``: ``{name: value}`` strings (``kubernetes.io/meta/podName`` …)
TagName = Annotated[StrictStr, Field(min_length=1, max_length=1024)]
AllocationTags = dict[TagName, Annotated[StrictStr, Field(max_length=65536)]]
#: A declared runtime in seconds: a positive JSON number (docs/eta.md), at most 100 years.
MaxRuntime = Annotated[float, Field(gt=0, le=3.2e9, allow_inf_nan=False,
                                    description="declared runtime in seconds (the ETA's end of it)"),
                       BeforeValidator(_number)]
#: A response resource map (may hold negative amounts, e.g. headroom).
ResourceOut = dict[str, int]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=False)


#: a Kubernetes label name or value (a map entry)
LabelName = Annotated[StrictStr, Field(min_length=1, max_length=317)]
Labels = dict[LabelName, Annotated[StrictStr, Field(max_length=63)]]


class NodeBody(_Body):
    """``PUT /ws/v1/partition/{p}/node/{node}``: the node's capacity."""

    capacity: ResourceMap = Field(description="capacity in internal units, e.g. {\"vcore\": 16000}")
    schedulable: StrictBool = Field(default=True, description=(
        "false: cordoned — keeps its allocations, adds nothing to the cluster's capacity"))
    labels: Labels | None = Field(default=None, description=(
        "the node's labels; they select the resource flavors it counts for (docs/flavors.md)"))


class Toleration(_Body):
    """A Kubernetes toleration (``{key, operator, value, effect}``)."""

    key: StrictStr = ""
    operator: Literal["Equal", "Exists"] = "Equal"
    value: StrictStr = ""
    effect: Literal["", "NoSchedule", "PreferNoSchedule", "NoExecute"] = ""
    tolerationSeconds: int | None = None


class NodeSelectorRequirement(_Body):
    """One requirement of a node selector term (Kubernetes' ``{key, operator, values}``)."""

    key: LabelName
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: list[StrictStr] = Field(default_factory=list, max_length=1024)


class NodeSelectorTerm(_Body):
    """A node selector term: every requirement holds (the terms of an affinity are ORed)."""

    matchExpressions: list[NodeSelectorRequirement] = Field(default_factory=list, max_length=1024)


class Placement(_Body):
    """Where a request may run, for choosing its resource flavors (docs/flavors.md)."""

    nodeSelector: Labels | None = Field(default=None, description=(
        "label → value; a flavor whose node labels disagree on a key is not used"))
    nodeAffinity: list[NodeSelectorTerm] | None = Field(default=None, max_length=1024, description=(
        "required node affinity (Kubernetes' nodeSelectorTerms, ORed), matched against flavor labels"))
    tolerations: list[Toleration] | None = Field(default=None, max_length=1024, description=(
        "a flavor's NoSchedule/NoExecute taints must be tolerated"))

    def placement(self) -> dict[str, Any]:
        """The keyword arguments of ``Partition.allocate`` / ``add_ask`` / ``what_if``."""
        return {"node_selector": self.nodeSelector,
                "node_affinity": None if self.nodeAffinity is None else
                [t.model_dump() for t in self.nodeAffinity],
                "tolerations": None if self.tolerations is None else
                [t.model_dump(exclude={"tolerationSeconds"}) for t in self.tolerations]}


class ApplicationBody(_Body):
    """``POST /ws/v1/partition/{p}/applications``."""

    applicationID: Name
    user: Name
    groups: list[Name] = Field(default_factory=list)
    queue: Name | None = Field(default=None, description="requested queue (full path); placement decides",
                               json_schema_extra={"pattern": QUEUE_PATTERN})
    tags: dict[StrictStr, StrictStr] | None = None


class AllocationBody(Placement):
    """``POST /ws/v1/partition/{p}/allocations`` (also one entry of a batch)."""

    applicationID: Name
    allocationKey: Name
    resource: ResourceMap
    priority: Priority = 0
    preemptible: StrictBool = True
    nodeID: Name | None = Field(default=None, description="the registered node it runs on, when known")
    allocationTags: AllocationTags | None = Field(default=None, description=(
        "YuniKorn's allocation tags, kept with the allocation (e.g. kubernetes.io/meta/podName)"))
    maxRuntime: MaxRuntime | None = None


class AllocationNodeBody(_Body):
    """``PUT /ws/v1/partition/{p}/allocation/{key}/node``: the node the allocation runs on."""

    nodeID: Name


class WhatIfBody(Placement):
    """``POST /ws/v1/partition/{p}/whatif``: an allocation body; the key is optional and unused."""

    applicationID: Name
    allocationKey: Name | None = None
    resource: ResourceMap
    priority: Priority = 0
    preemptible: StrictBool = True
    #: the declared runtime it would have: a budget counts what it would commit (docs/budgets.md)
    maxRuntime: MaxRuntime | None = None


class BatchBody(_Body):
    """``POST /ws/v1/partition/{p}/allocations/batch``: many allocations, one journal transaction."""

    allocations: list[AllocationBody] = Field(max_length=100_000)


# ---------------------------------------------------------------------------------------------------
# Documented responses


class ErrorBody(BaseModel):
    """YuniKorn's ``dao.YAPIError``; a "not the leader" answer also carries ``leader``."""

    status_code: int
    message: str
    description: str
    leader: str | None = None
    line: int | None = None
    problems: list[dict[str, Any]] | None = None


class ViolationOut(BaseModel):
    """One reason a request does not fit."""

    policy: str
    code: str
    path: str
    message: str
    resource: ResourceOut


class DecisionOut(BaseModel):
    """An admission decision."""

    allocated: bool
    allocationKey: str | None = None
    queueName: str | None = None
    reasons: list[ViolationOut]
    preempted: list[str] | None = None


class WhatIfOut(BaseModel):
    """The decision an allocation would get now, and what it would preempt."""

    allocated: bool
    queueName: str | None = None
    reasons: list[ViolationOut]
    wouldPreempt: list[str] = Field(default_factory=list,
                                    description="allocation keys allocate would preempt to admit it")


class BatchOut(BaseModel):
    """A decision per entry of a batch, in order."""

    decisions: list[DecisionOut]
    allocated: int
    refused: int


class ApplicationOut(BaseModel):
    """An application: id, placed queue and lifecycle state (seed 001 names)."""

    applicationID: str
    queueName: str
    state: str
    user: str | None = None
    groups: list[str] | None = None
    tags: dict[str, str] | None = None
    allocations: list[dict[str, Any]] | None = None


class AllocationDaoOut(BaseModel):
    """YuniKorn's ``AllocationDAOInfo`` (empty fields omitted)."""

    allocationKey: str
    allocationTime: int | None = None
    resource: ResourceOut | None = None
    priority: str | None = None
    nodeId: str | None = None
    applicationId: str | None = None
    placeholder: bool | None = None
    taskGroupName: str | None = None
    allocationTags: dict[str, str] | None = None
    preempted: bool | None = None


class NodeOut(BaseModel):
    """A registered node: YuniKorn's ``NodeDAOInfo`` (empty fields omitted)."""

    nodeID: str
    capacity: ResourceOut | None = None
    allocated: ResourceOut | None = None
    available: ResourceOut | None = None
    utilized: ResourceOut | None = None
    allocations: list[AllocationDaoOut] | None = None
    schedulable: bool
    isReserved: bool


class CapacityOut(BaseModel):
    """Partition capacity, used capacity and utilisation in percent (empty ones omitted)."""

    capacity: ResourceOut | None = None
    usedCapacity: ResourceOut | None = None
    utilization: ResourceOut | None = None


class PartitionOut(BaseModel):
    """An entry of ``GET /ws/v1/partitions``: YuniKorn's ``PartitionInfo``."""

    clusterId: str
    name: str
    capacity: CapacityOut
    nodeSortingPolicy: dict[str, Any]
    preemptionEnabled: bool
    quotaPreemptionEnabled: bool
    totalNodes: int | None = None
    applications: dict[str, int] | None = None
    totalContainers: int | None = None
    state: str | None = None


class ClusterOut(BaseModel):
    """An entry of ``GET /ws/v1/clusters``: YuniKorn's ``ClusterDAOInfo``."""

    startTime: int | None = None
    partition: str
    clusterName: str


class EventBatchOut(BaseModel):
    """``GET /ws/v1/events/batch``: YuniKorn's ``EventRecordDAO``."""

    InstanceUUID: str
    LowestID: int
    HighestID: int
    EventRecords: list[dict[str, Any]] | None


class ApplicationDaoOut(BaseModel):
    """YuniKorn's ``ApplicationDAOInfo`` (empty fields omitted)."""

    model_config = ConfigDict(extra="allow")

    applicationID: str
    partition: str
    queueName: str
    applicationState: str | None = None
    usedResource: ResourceOut | None = None
    pendingResource: ResourceOut | None = None
    submissionTime: int | None = None
    finishedTime: int | None = None
    requests: list[dict[str, Any]] | None = None
    allocations: list[dict[str, Any]] | None = None
    user: str | None = None
    groups: list[str] | None = None
    stateLog: list[dict[str, Any]] | None = None
    startTime: int | None = None
    resourceHistory: dict[str, Any]


class QueueOut(BaseModel):
    """YuniKorn's ``PartitionQueueDAOInfo`` (reference §2.3); empty fields are omitted."""

    model_config = ConfigDict(extra="allow")

    queuename: str
    status: str | None = None
    partition: str | None = None
    maxResource: ResourceOut | None = None
    guaranteedResource: ResourceOut | None = None
    allocatedResource: ResourceOut | None = None
    headroom: ResourceOut | None = None
    isLeaf: bool | None = None
    isManaged: bool | None = None
    children: list[QueueOut] | None = None


class ResourceUsageOut(BaseModel):
    """YuniKorn's ``ResourceUsageDAOInfo`` (reference §2.1), recursive."""

    model_config = ConfigDict(extra="allow")

    queuePath: str
    resourceUsage: ResourceOut | None = None
    runningApplications: list[str] | None = None
    maxResources: ResourceOut | None = None
    maxApplications: int | None = None
    children: list[ResourceUsageOut] | None = None


class UserUsageOut(BaseModel):
    """YuniKorn's ``UserResourceUsageDAOInfo``."""

    model_config = ConfigDict(extra="allow")

    userName: str
    groups: dict[str, str] | None = None
    queues: ResourceUsageOut | None = None


class GroupUsageOut(BaseModel):
    """YuniKorn's ``GroupResourceUsageDAOInfo``."""

    model_config = ConfigDict(extra="allow")

    groupName: str
    applications: list[str] | None = None
    queues: ResourceUsageOut | None = None


class ValidateConfOut(BaseModel):
    """``POST /ws/v1/validate-conf`` (YuniKorn's ``ValidateConfResponse``: ``reason`` omitted when empty,
    as for an empty document)."""

    allowed: bool
    reason: str | None = None


class HealthCheckOut(BaseModel):
    """One health check."""

    Name: str
    Succeeded: bool
    Description: str
    DiagnosisMessage: str | None = None


class HealthOut(BaseModel):
    """``GET /ws/v1/scheduler/healthcheck``."""

    Healthy: bool
    HealthChecks: list[HealthCheckOut]


class ConfigAppliedOut(BaseModel):
    """``PUT /ws/v1/config``."""

    applied: bool
    checksum: str | None = None


class OkOut(BaseModel):
    """A plain acknowledgement of a change that was journalled."""

    model_config = ConfigDict(extra="allow")

    ok: bool
