"""LightRAG Server's graph-editing routes (issue 14, "a drop-in for LightRAG Server"): the
request bodies of LightRAG 1.5.7 and its WebUI, the answer fields the WebUI reads, LightRAG's
status codes and messages, and the effect seen through the public read path (/graphs, the
labels, /query/data, a vector search for a new description).

Real HTTP against the package's Serve app (tests/served/conftest.py: real Ray, Milvus Lite, fast
extraction), in a workspace of this module's own; each test edits entities of its own, so their order does not matter, but the
insert that keeps the workspace busy comes last.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.serve_helpers import owner_log_text

WORKSPACE = "graph_edits"  # the module's workspace on the package's app (tests/served/conftest.py)


def labels(client: httpx.Client) -> set[str]:
    return set(client.get("/graph/label/list").json())


def graph(client: httpx.Client, label: str) -> tuple[dict[str, dict[str, Any]], set[frozenset[str]]]:
    """The nodes (by name) and edges (as name pairs) within one hop of ``label`` in /graphs."""
    response = client.get("/graphs", params={"label": label, "max_depth": 1})
    assert response.status_code == 200, response.text
    body = response.json()
    return ({n["id"]: n["properties"] for n in body["nodes"]},
            {frozenset((e["source"], e["target"])) for e in body["edges"]})


def retrieved(client: httpx.Client, keywords: list[str], top_k: int = 40) -> dict[str, Any]:
    """/query/data (local mode) for entities found by ``keywords``."""
    response = client.post("/query/data", json={"query": keywords[0], "mode": "local", "top_k": top_k,
                                                "ll_keywords": keywords, "hl_keywords": []})
    assert response.status_code == 200, response.text
    return response.json()["data"]


def graph_version(client: httpx.Client) -> int:
    return client.get("/health").json()["graph_version"]


def ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "success"
    return body


def refused(response: httpx.Response, status: int, detail: str) -> None:
    assert response.status_code == status, response.text
    assert detail in response.json()["detail"]


# ---- entities -------------------------------------------------------------------------------

def test_edited_description_is_re_embedded_and_seen_by_readers(client, indexed):
    new = "A pastry chef famous for chocolate croissants and marzipan cakes."
    assert retrieved(client, [new], top_k=1)["entities"][0]["entity_name"] != "Dora Quinn"
    version = graph_version(client)
    body = ok(client.post("/graph/entity/edit", json={"entity_name": "Dora Quinn", "updated_data": {"description": new},
                                                       "allow_rename": False, "allow_merge": False}))
    assert body["message"] == "Entity updated successfully"
    assert body["data"]["entity_name"] == "Dora Quinn" and body["data"]["graph_data"]["description"] == new
    assert body["operation_summary"] == {"merged": False, "merge_status": "not_attempted", "merge_error": None,
                                         "operation_status": "success", "target_entity": None,
                                         "final_entity": "Dora Quinn", "renamed": False}
    assert graph_version(client) == version + 1
    nodes, edges = graph(client, "Dora Quinn")
    assert nodes["Dora Quinn"]["description"] == new and frozenset(("Dora Quinn", "Lisbon")) in edges
    found = retrieved(client, [new], top_k=1)["entities"]  # the vector of the new description
    assert [(e["entity_name"], e["description"]) for e in found] == [("Dora Quinn", new)]


def test_rename_moves_the_entity_and_its_relations(client, indexed):
    refused(client.post("/graph/entity/edit", json={"entity_name": "Carol White", "updated_data": {
        "entity_name": "Caroline White"}}), 400, "Entity renaming is not allowed")
    _, before = graph(client, "Carol White")
    body = ok(client.post("/graph/entity/edit", json={"entity_name": "Carol White", "updated_data": {
        "entity_name": "Caroline White"}, "allow_rename": True, "allow_merge": False}))
    summary = body["operation_summary"]
    assert summary["renamed"] is True and summary["merged"] is False and summary["final_entity"] == "Caroline White"
    assert body["data"]["entity_name"] == "Caroline White"
    assert "Caroline White" in labels(client) and "Carol White" not in labels(client)
    _, after = graph(client, "Caroline White")
    renamed = {frozenset("Caroline White" if n == "Carol White" else n for n in edge) for edge in before}
    assert before and after == renamed
    data = retrieved(client, ["Caroline White"])
    assert "Caroline White" in {e["entity_name"] for e in data["entities"]}
    assert all("Carol White" not in (r["src_id"], r["tgt_id"]) for r in data["relationships"])
    assert any("Caroline White" in (r["src_id"], r["tgt_id"]) for r in data["relationships"])


def test_rename_onto_an_existing_entity_merges_only_when_allowed(client, indexed):
    rename = {"entity_name": "Paris", "updated_data": {"entity_name": "Lisbon"}, "allow_rename": True}
    refused(client.post("/graph/entity/edit", json=rename), 400, "Entity name 'Lisbon' already exists, cannot rename")
    _, paris = graph(client, "Paris")
    body = ok(client.post("/graph/entity/edit", json={**rename, "allow_merge": True}))
    assert body["message"] == "Entity merged successfully into 'Lisbon'"
    summary = body["operation_summary"]
    assert summary["merged"] is True and summary["merge_status"] == "success" and summary["final_entity"] == "Lisbon"
    assert "Paris" not in labels(client)
    _, lisbon = graph(client, "Lisbon")
    assert {frozenset("Lisbon" if n == "Paris" else n for n in edge) for edge in paris} <= lisbon


def test_create_entity_then_a_relation_to_it(client, indexed):
    entity = {"entity_name": "Quentin Blake", "entity_data": {"description": "An illustrator of whimsical children's "
                                                                             "books", "entity_type": "PERSON"}}
    body = ok(client.post("/graph/entity/create", json=entity))
    assert body["message"] == "Entity 'Quentin Blake' created successfully"
    assert body["data"]["graph_data"]["entity_type"] == "PERSON" and body["data"]["source_id"] == "manual_creation"
    refused(client.post("/graph/entity/create", json=entity), 400, "Entity 'Quentin Blake' already exists")
    relation = {"source_entity": "Quentin Blake", "target_entity": "Bob Jones", "relation_data": {
        "description": "Quentin Blake illustrates the novels of Bob Jones", "keywords": "illustration", "weight": 2.0}}
    body = ok(client.post("/graph/relation/create", json=relation))
    assert body["message"] == "Relation created successfully between 'Quentin Blake' and 'Bob Jones'"
    assert body["data"]["graph_data"]["weight"] == 2.0 and body["data"]["graph_data"]["keywords"] == "illustration"
    refused(client.post("/graph/relation/create", json=relation), 400,
            "Relation from 'Quentin Blake' to 'Bob Jones' already exists")
    refused(client.post("/graph/relation/create", json={**relation, "target_entity": "Nobody Known"}), 400,
            "Target entity 'Nobody Known' does not exist")
    nodes, edges = graph(client, "Quentin Blake")
    assert nodes["Quentin Blake"]["entity_type"] == "PERSON" and frozenset(("Quentin Blake", "Bob Jones")) in edges
    found = retrieved(client, ["illustrator of whimsical children's books"], top_k=1)["entities"]
    assert [e["entity_name"] for e in found] == ["Quentin Blake"]


def test_merge_moves_relations_onto_the_target(client, indexed):
    refused(client.post("/graph/entities/merge", json={"entities_to_change": ["Atlantis"],
                                                        "entity_to_change_into": "London"}),
            400, "Source entity 'Atlantis' does not exist")
    _, london = graph(client, "London")
    body = ok(client.post("/graph/entities/merge", json={"entities_to_change": ["London"],
                                                          "entity_to_change_into": "Greater London"}))
    assert body["message"] == "Successfully merged 1 entities into 'Greater London'"
    assert body["data"]["entity_name"] == "Greater London"
    assert "London" not in labels(client) and "Greater London" in labels(client)
    _, merged = graph(client, "Greater London")
    assert london and merged == {frozenset("Greater London" if n == "London" else n for n in edge) for edge in london}
    relations = retrieved(client, ["Bob Jones"])["relationships"]
    assert any({r["src_id"], r["tgt_id"]} == {"Bob Jones", "Greater London"} for r in relations)
    assert all("London" not in (r["src_id"], r["tgt_id"]) for r in relations)


def test_delete_entity_removes_it_and_its_relations(client, indexed):
    nodes, edges = graph(client, "Acme Corporation")
    assert edges
    response = client.request("DELETE", "/documents/delete_entity", json={"entity_name": "Acme Corporation"})
    assert response.status_code == 200, response.text
    assert response.json() == {"status": "success", "doc_id": "", "status_code": 200, "file_path": None,
                               "message": f"Entity Delete: remove 'Acme Corporation' and its {len(edges)} relations"}
    assert "Acme Corporation" not in labels(client)
    for name in set(nodes) - {"Acme Corporation"}:
        assert "Acme Corporation" not in graph(client, name)[0]
    data = retrieved(client, ["Acme Corporation"])
    assert "Acme Corporation" not in {e["entity_name"] for e in data["entities"]}
    assert all("Acme Corporation" not in (r["src_id"], r["tgt_id"]) for r in data["relationships"])
    refused(client.request("DELETE", "/graph/entity/delete", json={"entity_name": "Acme Corporation"}),
            404, "Entity 'Acme Corporation' not found.")


# ---- relations ------------------------------------------------------------------------------

def test_edit_relation_re_embeds_it_and_readers_see_it(client, indexed):
    update = {"description": "Alice Smith and Bob Jones sailed around Cape Horn together", "keywords": "voyage",
              "weight": "5"}  # the WebUI's editor sends strings
    body = ok(client.post("/graph/relation/edit", json={"source_id": "Bob Jones", "target_id": "Alice Smith",
                                                        "updated_data": update}))
    assert body["message"] == "Relation updated successfully"
    data = body["data"]
    assert (data["src_entity"], data["tgt_entity"]) == ("Bob Jones", "Alice Smith")
    assert data["graph_data"]["weight"] == 5.0 and data["graph_data"]["description"] == update["description"]
    response = client.get("/graphs", params={"label": "Alice Smith", "max_depth": 1}).json()
    edge = next(e for e in response["edges"] if {e["source"], e["target"]} == {"Alice Smith", "Bob Jones"})
    assert edge["properties"]["description"] == update["description"] and edge["properties"]["weight"] == 5.0
    assert "voyage" in edge["properties"]["keywords"]
    found = client.post("/query/data", json={"query": "sailing around Cape Horn", "mode": "global", "top_k": 1,
                                             "hl_keywords": ["sailing voyage around Cape Horn"], "ll_keywords": []})
    relations = found.json()["data"]["relationships"]
    assert [r["description"] for r in relations] == [update["description"]]


def test_delete_relation_keeps_both_entities(client, indexed):
    body = {"source_entity": "Dora Quinn", "target_entity": "Lisbon"}
    response = client.request("DELETE", "/graph/relation/delete", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["message"] == "Relation Delete: `Dora Quinn`~`Lisbon` deleted successfully"
    assert {"Dora Quinn", "Lisbon"} <= labels(client)
    assert frozenset(("Dora Quinn", "Lisbon")) not in graph(client, "Dora Quinn")[1]
    relations = retrieved(client, ["Dora Quinn"])["relationships"]
    assert all({r["src_id"], r["tgt_id"]} != {"Dora Quinn", "Lisbon"} for r in relations)
    refused(client.request("DELETE", "/documents/delete_relation", json=body), 404,
            "Relation from 'Dora Quinn' to 'Lisbon' does not exist")


# ---- errors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("route, body, status, detail", [
    ("/graph/entity/edit", {"entity_name": "Nobody Known", "updated_data": {"description": "x"}}, 400,
     "Entity 'Nobody Known' does not exist"),
    ("/graph/entity/edit", {"entity_name": "Bob Jones", "updated_data": {"color": "red"}}, 400,
     "Unknown entity field 'color'"),
    ("/graph/entity/edit", {"entity_name": "Bob Jones", "updated_data": {"description": 7}}, 400,
     "Entity field 'description' must be a string"),
    ("/graph/entity/edit", {"entity_name": "Bob Jones", "updated_data": {"description": " "}}, 400,
     "Entity description cannot be empty for edit operation"),
    ("/graph/relation/edit", {"source_id": "Bob Jones", "target_id": "Dora Quinn", "updated_data": {"weight": 2}}, 400,
     "Relation from 'Bob Jones' to 'Dora Quinn' does not exist"),
    ("/graph/relation/edit", {"source_id": "Bob Jones", "target_id": "Alice Smith", "updated_data": {"weight": "heavy"}},
     400, "Relation field 'weight' must be a non-negative number"),
    ("/graph/entity/create", {"entity_name": "Empty One", "entity_data": {"entity_type": "PERSON"}}, 400,
     "Entity description cannot be empty for create operation"),
    ("/graph/relation/create", {"source_entity": "Bob Jones", "target_entity": "bob jones",
                                "relation_data": {"description": "himself"}}, 400, "Cannot create a self-loop relation"),
    ("/graph/entity/edit", {"entity_name": " ", "updated_data": {}}, 422, ""),
    ("/graph/entity/edit", {"entity_name": "Bob Jones"}, 422, ""),
    ("/graph/entities/merge", {"entities_to_change": [], "entity_to_change_into": "Bob Jones"}, 422, ""),
    ("/graph/relation/create", {"source_entity": "Bob Jones", "relation_data": {}}, 422, ""),
])
def test_refused_edits_get_lightrag_status_and_message(client, indexed, route, body, status, detail):
    response = client.post(route, json=body)
    assert response.status_code == status, response.text
    if detail:
        assert detail in response.json()["detail"]


def test_deletes_need_their_names(client, indexed):
    for route in ("/graph/entity/delete", "/documents/delete_relation"):
        assert client.request("DELETE", route, json={"entity_name": ""}).status_code == 422


# ---- refusals are answers, not errors -----------------------------------------------------

def test_refusals_are_answers_not_errors_in_the_owner_log(client, indexed):
    """Refused edits (400/404) are normal answers: the workspace owner returns them rather than
    raising, so Serve logs no ERROR with a traceback for them (the busy 409: in
    test_serve_document_routes)."""
    refused(client.post("/graph/entity/edit", json={"entity_name": "Nobody Known", "updated_data": {"description": "x"}}),
            400, "Entity 'Nobody Known' does not exist")
    text = owner_log_text()
    assert "edit_graph" in text  # the owner logged the requests themselves
    assert "GraphEditError" not in text and "Traceback" not in text
