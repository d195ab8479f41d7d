"""The event stream: whole records in, whole records out, even while the writer is mid-line."""




# --- the line framer: the one way every reader cuts an event file into lines ------------------

def test_framer_holds_a_torn_line_until_its_newline_arrives():
    from amptui.core.stream.events import LineFramer

    framer = LineFramer()
    assert framer.feed(b'{"kind":"start"}\n{"kind":"st') == [b'{"kind":"start"}']
    assert framer.held_bytes == len(b'{"kind":"st') and not framer.at_line_start
    assert framer.feed(b"ep") == []
    assert framer.feed(b'"}\n\n  \n{"kind":"end"}\n') == [b'{"kind":"step"}', b'{"kind":"end"}']
    assert framer.at_line_start and framer.bad_lines == 0


def test_framer_drops_an_over_long_line_without_holding_it_and_counts_it_once():
    from amptui.core.stream.events import LineFramer

    framer = LineFramer(max_line=100)
    assert framer.feed(b'{"kind":"start"}\n' + b"x" * 60) == [b'{"kind":"start"}']
    for _ in range(50):  # the line goes on and on: never more than max_line held
        assert framer.feed(b"x" * 60) == []
        assert framer.held_bytes <= 100
    assert framer.bad_lines == 1
    assert framer.feed(b'xx\n{"kind":"end"}\n') == [b'{"kind":"end"}']
    assert framer.bad_lines == 1 and framer.at_line_start
    # a long line that arrives whole in one chunk is counted the same way
    assert framer.feed(b"y" * 500 + b'\n{"kind":"end"}\n') == [b'{"kind":"end"}']
    assert framer.bad_lines == 2


def test_framer_counts_invalid_json_and_wrong_types_as_bad_lines():
    from amptui.core.stream.events import LineFramer

    framer = LineFramer()
    records = framer.records(b'{"kind":"start"}\nnot json\n[1]\n{"kind":"step","step":"x"}\n'
                             b'{"kind":"step","loss":NaN}\n{"kind":"end"}\n')
    assert [r["kind"] for r in records] == ["start", "end"]
    assert framer.bad_lines == 4
