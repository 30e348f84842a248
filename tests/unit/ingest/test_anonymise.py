"""IP truncation and keyed hashes, and the rewriting of the contract's fields in events."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.collector_settings import CollectorSettings
from data_contracts import ContractError, load_contract
from ingest.anonymise import Anonymiser, KeyedHash, keep_ip, truncate_ip
from tests.unit.data_contracts.contract_edits import edited, handling

KEY = "0123456789abcdef" * 4
CONTRACT = load_contract("web_events", 1)


def _hmac(data: bytes, key: str = KEY) -> str:
    return hmac.new(key.encode(), data, hashlib.sha256).hexdigest()


@pytest.mark.parametrize(
    ("address", "network"),
    [
        ("192.0.2.133", "192.0.2.0"),
        ("10.1.2.3", "10.1.2.0"),
        ("255.255.255.255", "255.255.255.0"),
        ("0.0.0.0", "0.0.0.0"),
        ("2001:db8:aa:bb:cc:dd:ee:ff", "2001:db8:aa::"),
        ("2001:DB8:AA:BB::1", "2001:db8:aa::"),  # any spelling, canonical output
        ("2001:0db8:0000:0000:0000:0000:0000:0001", "2001:db8::"),
        ("fe80::1%eth0", "fe80::"),  # the zone goes
        ("::1", "::"),
        # A dual-stack socket's view of an IPv4 client is that client's IPv4 network.
        ("::ffff:192.0.2.133", "192.0.2.0"),
        ("::FFFF:c000:0285", "192.0.2.0"),
        # 6to4: bits 16-48 are an IPv4 address, of which /24 is kept.
        ("2002:c000:0285:1::1", "2002:c000:200::"),
    ],
)
def test_truncation_keeps_the_network(address, network):
    assert truncate_ip(address) == network
    assert keep_ip(address) == address


NOT_ADDRESSES = [
    "",
    "testclient",  # Starlette's test client as the request's address
    "1.2.3",
    "1.2.3.4.5",
    "01.2.3.4",  # leading zeros: octal to some parsers
    "0x7f.0.0.1",
    "1.2.3.256",
    " 1.2.3.4",
    "1.2.3.4\n",
    "1.2.3.4/24",
    "1.2.3.4:8080",
    "[::1]",
    "::g",
    "1:2:3:4:5:6:7:8:9",
    "fe80::1%",
    "1.2.3.4\x00",
    "\uff11.\uff12.\uff13.\uff14",  # full-width digits
    "jane@example.com",
    "x" * 10_000,
]


@pytest.mark.parametrize("text", NOT_ADDRESSES)
def test_a_value_that_is_not_an_ip_address_is_never_let_through(text):
    assert truncate_ip(text) is None
    assert keep_ip(text) is None
    assert KeyedHash(KEY).ip(text) is None


@given(st.ip_addresses())
def test_truncation_agrees_with_the_ipaddress_module(address):
    if address.version == 6 and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    keep = 24 if address.version == 4 else 40 if address.sixtofour is not None else 48
    network = ipaddress.ip_network(f"{address}/{keep}", strict=False).network_address
    assert truncate_ip(str(address)) == str(network)
    assert truncate_ip(address.exploded) == str(network)


def test_the_keyed_hash_is_hmac_sha256_of_the_address_bytes():
    keyed = KeyedHash(KEY)
    assert keyed.ip("192.0.2.7") == _hmac(bytes([192, 0, 2, 7]))
    assert keyed.ip("::ffff:192.0.2.7") == keyed.ip("192.0.2.7")
    v6 = ipaddress.IPv6Address("2001:db8::7")
    assert keyed.ip("2001:DB8:0::7") == _hmac(v6.packed)
    # Without the key, hashing every IPv4 address does not find it.
    assert keyed.ip("192.0.2.7") != hashlib.sha256(bytes([192, 0, 2, 7])).hexdigest()
    assert KeyedHash("another key " * 4).ip("192.0.2.7") != keyed.ip("192.0.2.7")
    assert len(keyed.ip("192.0.2.7")) == 64
    assert keyed.text("jane") == _hmac(b"jane")
    assert KEY not in repr(keyed)


def _anonymiser(**settings: object) -> Anonymiser:
    return Anonymiser.for_contract(CONTRACT, CollectorSettings(**settings))


def test_the_contract_fields_are_rewritten_and_the_event_copied_on_write():
    event = {"type": "page", "context": {"ip": "192.0.2.7", "userAgent": "UA", "locale": "en"}}
    out = _anonymiser().event(event)
    assert out == {
        "type": "page",
        "context": {"ip": "192.0.2.0", "userAgent": "UA", "locale": "en"},
    }
    assert event["context"]["ip"] == "192.0.2.7"  # the caller's event is untouched
    unchanged = {"type": "page", "context": {"ip": "192.0.2.0"}}
    assert _anonymiser().event(unchanged) is unchanged


@pytest.mark.parametrize(
    "value", ["not an address", 3232235777, ["192.0.2.7"], {"v4": "192.0.2.7"}, True]
)
def test_a_field_value_that_is_not_an_address_is_removed(value):
    out = _anonymiser().event({"type": "page", "context": {"ip": value, "locale": "en"}})
    assert out == {"type": "page", "context": {"locale": "en"}}


@pytest.mark.parametrize(
    "event",
    [
        {"type": "page"},
        {"type": "page", "context": None},
        {"type": "page", "context": "192.0.2.7"},  # not an object: the validator refuses it
        {"type": "page", "context": {"ip": None}},  # null is absent; enrichment drops it
    ],
)
def test_events_without_the_field_are_returned_as_they_are(event):
    assert _anonymiser().event(event) is event


def test_settings_choose_the_ip_method():
    event = {"context": {"ip": "192.0.2.7"}}
    hashed = _anonymiser(ip_anonymisation="hash", hash_key=KEY).event(event)
    assert hashed["context"]["ip"] == _hmac(bytes([192, 0, 2, 7]))
    assert _anonymiser(ip_anonymisation="keep").event(event) is event
    for settings in (
        {},
        {"ip_anonymisation": "hash", "hash_key": KEY},
        {"ip_anonymisation": "keep"},
    ):
        anonymiser = _anonymiser(**settings)
        assert anonymiser.request_ip("testclient") is None
        assert anonymiser.request_ip("192.0.2.7") == anonymiser.event(event)["context"]["ip"]


def test_a_hashed_field_needs_the_key():
    contract = edited(anonymousId={"customProperties": handling("hash")})
    with pytest.raises(ContractError, match="WAP_COLLECTOR__HASH_KEY"):
        Anonymiser.for_contract(contract, CollectorSettings())
    anonymiser = Anonymiser.for_contract(contract, CollectorSettings(hash_key=KEY))
    assert anonymiser.event({"anonymousId": "a-1"}) == {"anonymousId": _hmac(b"a-1")}


def test_a_batch_body_has_its_calls_and_its_context_rewritten():
    body = {
        "batch": [{"context": {"ip": "192.0.2.7"}}, "not a call", {"type": "page"}],
        "context": {"ip": "2001:db8:aa:bb::1"},
        "sentAt": "2026-11-21T10:00:00Z",
    }
    out = _anonymiser().body(body)
    assert out == {
        "batch": [{"context": {"ip": "192.0.2.0"}}, "not a call", {"type": "page"}],
        "context": {"ip": "2001:db8:aa::"},
        "sentAt": "2026-11-21T10:00:00Z",
    }
    assert out["batch"][2] is body["batch"][2]
    clean = {"batch": [{"type": "page"}]}
    assert _anonymiser().body(clean) is clean
