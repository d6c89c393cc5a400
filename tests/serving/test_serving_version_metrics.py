"""tfxp's per-version metrics on the local server, scraped and parsed as Prometheus parses them.

TF Serving's own series keep their names and labels (no version: its util.cc:66-68 counts by model_name and
status); tfxp's add the version a request resolved to, and the class each answer row predicts.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families
from serving_fixtures import (
    image_example,
    random_png,
    tiny_classifier,
    write_classification_version,
    write_model_version,
)

from foundation.contract import LABELS_ASSET, write_label_map
from serving.errors import InvalidArgumentError, NotFoundError, ServingError
from serving.grpc_client import GrpcClient
from serving.model_config import ModelConfig, VersionPolicy
from serving.predicted_class import predicted_classes
from serving.server import ModelServer
from serving.server_options import ServerOptions

SIZE, CHANNELS = 8, 1
LABELS = ["cat", "dog", "bird"]
IMAGES = [random_png(SIZE, CHANNELS, seed) for seed in range(6)]
TFXP_FAMILIES = ("tfxp_serving_requests", "tfxp_serving_request_latency_microseconds", "tfxp_serving_predicted_class")
LATENCY_BUCKETS = 33 + 1  # TF Serving's 33 exponential buckets (serving/metrics.py) and +Inf


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelServer]:
    root = tmp_path_factory.mktemp("models")
    for version in (1, 2):
        write_model_version(root / "m", version, tiny_classifier(SIZE, CHANNELS, 3, seed=version), labels=LABELS)
    classifier = write_classification_version(root / "c", 1, tiny_classifier(SIZE, CHANNELS, 3), labels=LABELS)
    write_label_map(classifier / LABELS_ASSET, LABELS[:2])  # "bird" is not in its label map: counted as other
    models = [
        ModelConfig("m", root / "m", VersionPolicy("all"), {"stable": 1}),
        ModelConfig("c", root / "c"),
    ]
    options = ServerOptions(grpc_port=0, rest_port=0, allow_version_labels_for_unavailable_models=True)
    with ModelServer(models, options) as running:
        yield running


def scrape(server: ModelServer) -> dict[str, list[tuple[str, dict[str, str], float]]]:
    """Family name → its samples (name, labels, value), from the server's metrics path."""
    text = requests.get(server.rest_url + server.options.monitoring_path, timeout=10).text
    return {
        family.name: [(sample.name, sample.labels, sample.value) for sample in family.samples]
        for family in text_string_to_metric_families(text)
    }


def requests_by(families: dict, model: str) -> dict[tuple[str, str], float]:
    return {
        (labels["version"], labels["status"]): value
        for name, labels, value in families["tfxp_serving_requests"]
        if name == "tfxp_serving_requests_total" and labels["model_name"] == model
    }


def classes_by(families: dict, model: str) -> dict[tuple[str, str], float]:
    return {
        (labels["version"], labels["class"]): value
        for name, labels, value in families["tfxp_serving_predicted_class"]
        if name == "tfxp_serving_predicted_class_total" and labels["model_name"] == model
    }


def test_requests_to_two_versions_are_counted_apart_with_their_predicted_classes(server: ModelServer) -> None:
    before = scrape(server)
    client = GrpcClient(server.grpc_target, "m")
    expected: Counter[tuple[str, str]] = Counter()
    # By number, by label (stable → 1) and with no version (TF Serving's Latest: the newest loaded, 2).
    for kwargs, rows in (({"version": 1}, 2), ({"label": "stable"}, 1), ({}, 3), ({"version": 2}, 1)):
        prediction = client.predict_images(IMAGES[:rows], **kwargs)  # type: ignore[arg-type]
        expected.update((str(prediction.model_version), LABELS[i]) for i in prediction.classes.tolist())
    # A request that resolved its version, then failed: counted under that version.
    with pytest.raises(InvalidArgumentError):
        client.predict_images([b"not an image"], version=2)
    # Requests that failed before resolving one: version "".
    with pytest.raises(NotFoundError):
        client.predict_images(IMAGES[:1], version=7)
    with pytest.raises(InvalidArgumentError):
        client.predict_images(IMAGES[:1], label="nope")
    client.close()
    after = scrape(server)

    counted = Counter(requests_by(after, "m"))
    counted.subtract(requests_by(before, "m"))
    resolved = {("1", "OK"): 2, ("2", "OK"): 2, ("2", "INVALID_ARGUMENT"): 1}
    assert +counted == {**resolved, ("", "NOT_FOUND"): 1, ("", "INVALID_ARGUMENT"): 1}
    predicted = Counter(classes_by(after, "m"))
    predicted.subtract(classes_by(before, "m"))
    assert +predicted == expected and sum(expected.values()) == 7

    latency = {
        labels["version"]: value
        for name, labels, value in after["tfxp_serving_request_latency_microseconds"]
        if name.endswith("_count") and labels["model_name"] == "m"
    }
    assert latency["1"] >= 2 and latency["2"] >= 3
    buckets = [s for s in after["tfxp_serving_request_latency_microseconds"] if s[0].endswith("_bucket")]
    assert len([s for s in buckets if s[1]["version"] == "1" and s[1]["model_name"] == "m"]) == LATENCY_BUCKETS

    # TF Serving's own series are unchanged: no version label.
    (tf_serving,) = [f for f in after if f == ":tensorflow:serving:request_count"]
    assert {frozenset(labels) for _, labels, _ in after[tf_serving]} == {frozenset({"model_name", "status"})}


def test_classify_answers_count_their_top_class_within_the_label_map(server: ModelServer) -> None:
    before = classes_by(scrape(server), "c")
    client = GrpcClient(server.grpc_target, "c")
    results = client.classify([image_example(image) for image in IMAGES], signature_name="classification")
    client.close()
    top = Counter(
        label if label in LABELS[:2] else "other" for label in (max(row, key=lambda e: e[1])[0] for row in results)
    )
    counted = Counter(classes_by(scrape(server), "c"))
    counted.subtract(before)
    assert +counted == {("1", name): rows for name, rows in top.items()}


def test_label_cardinality_stays_bounded_for_garbage_requests(server: ModelServer) -> None:
    rng = random.Random(34)
    rest = server.rest_url
    for _ in range(60):
        name = "".join(rng.choices("abcdefghij", k=8))
        version, label = rng.randrange(3, 10**9), "".join(rng.choices("xyz", k=6))
        for path in (f"{name}:predict", f"m/versions/{version}:predict", f"m/labels/{label}:predict",
                     f"m/versions/{rng.choice((1, 2))}:predict", f"c/versions/{version}:classify"):  # fmt: skip
            body = rng.choice([b"{}", b"garbage", b'{"instances": [{"b64": "AAAA"}]}', rng.randbytes(40)])
            requests.post(f"{rest}/v1/models/{path}", data=body, timeout=10)
    client = GrpcClient(server.grpc_target, "m")
    for _ in range(20):  # floats where the signature takes strings
        with pytest.raises(ServingError):
            client.predict({"image_bytes": np.full((2,), rng.random(), np.float32)}, version=1)
    client.close()

    families = scrape(server)
    values: dict[str, set[str]] = {"model_name": set(), "version": set(), "class": set()}
    for family in (
        "tfxp_serving_requests",
        "tfxp_serving_request_latency_microseconds",
        "tfxp_serving_predicted_class",
    ):
        for _, labels, _ in families[family]:
            for key in values:
                if key in labels:
                    values[key].add(labels[key])
    assert values["model_name"] <= {"m", "c", "__unknown__"}
    assert values["version"] <= {"1", "2", ""}
    assert values["class"] <= {*LABELS, "other"}
    statuses = {labels["status"] for _, labels, _ in families["tfxp_serving_requests"]}
    assert statuses <= {"OK", "INVALID_ARGUMENT", "NOT_FOUND", "FAILED_PRECONDITION", "RESOURCE_EXHAUSTED"}


def test_predicted_classes_are_named_from_the_label_map_and_bounded() -> None:
    names = ("cat", "dog")
    assert predicted_classes({"classes": np.array([1, 0, 7, -1])}, names) == ["dog", "cat", "other", "other"]
    probabilities = np.array([[0.1, 0.9], [0.8, 0.2]], np.float32)
    assert predicted_classes({"probabilities": probabilities}, names) == ["dog", "cat"]  # `classes` filtered out
    assert predicted_classes({"classes": np.array([1])}, ()) == []  # no label map: no class can be named
    assert predicted_classes({"classes": np.array(["dog"], object)}, names) == []  # not the contract's shape
