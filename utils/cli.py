"""The `attn` command: open the course, release student copies, grade a notebook, maintain references."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path

# jsonschema (imported by nbformat) builds a grammar for the "iri" string format when rfc3987_syntax is
# installed: 1-4 s on every start of `attn`, for a format no notebook uses. Leaving it out changes nothing else.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]

from . import notebooks as nbs  # noqa: E402


def cmd_lab(args: argparse.Namespace) -> int:
    """Start JupyterLab in the course folder, opened on notebooks/ (or notebooks/zh/ with --lang zh, JupyterLab's own
    menus in Chinese too), with this environment's programs on PATH."""
    argv = [
        sys.executable, "-m", "jupyter", "lab",
        f"--ServerApp.root_dir={nbs.ROOT}",
        # JupyterLab overrides ServerApp.default_url
        "--LabApp.default_url=/lab/tree/notebooks" + ("" if args.lang == "en" else f"/{args.lang}"),
    ]
    if args.lang == "zh":
        # JupyterLab's default settings for this session: its language pack (jupyterlab-language-pack-zh-CN) chosen.
        argv.append(f"--LabApp.app_settings_dir={nbs.ROOT / 'jupyter-config' / 'lab-zh'}")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        argv.append("--allow-root")  # JupyterLab refuses to start as root without it (containers, Colab-like boxes)
    argv += args.jupyter_args
    print(lab_banner(args.jupyter_args), flush=True)
    os.chdir(nbs.ROOT)  # nbgrader's formgrader reads nbgrader_config.py from the folder it starts in
    # The course's server extension (utils/formgrader_csp.py): a Content-Security-Policy on Formgrader's pages, and
    # its buttons and submission pages off the server's event loop.
    config_path = os.pathsep.join(
        filter(None, [str(nbs.ROOT / "jupyter-config"), os.environ.get("JUPYTER_CONFIG_PATH")]))
    # Kernels and nbgrader (which runs `alembic`) find this environment's programs, activated or not.
    os.execve(sys.executable, argv, nbs.kernel_env({"JUPYTER_CONFIG_PATH": config_path}))
    return 0  # not reached


def lab_banner(jupyter_args: Sequence[str]) -> str:
    """What `attn lab` says before JupyterLab's own log (forty lines, the address with its token among them): where
    the course opens and how to stop it."""
    options = " ".join(jupyter_args)
    port = re.search(r"--(?:ServerApp\.)?port[= ](\d+)", options)
    url = f"http://localhost:{port.group(1) if port else 8888}/lab"
    browser = not re.search(r"--no-browser|open_browser=False", options)
    how = ("; your browser opens it in a few seconds (if not, open the link with its token printed below)" if browser
           else ": open the link with its token, printed below in a few seconds, in your browser")
    return f"Starting JupyterLab at {url} (or the next free port){how}. Stop it with Ctrl+C, twice."


def cmd_release(args: argparse.Namespace) -> int:
    """Regenerate notebooks/ (or notebooks/<lang>/) from solutions/; with --check, report what is out of date."""
    from . import i18n, release

    chosen = args.assignments or None
    langs = i18n.LANGUAGES if args.lang == "all" else (args.lang,)
    if args.solutions:
        for lang in (lang for lang in langs if lang != "en"):
            folder = release.write_solutions(lang, assignments=chosen)
            print(f"wrote the {i18n.NAMES[lang]} solutions (nbgrader's source for a class in that language) to "
                  f"{folder.relative_to(nbs.ROOT)}/")
        return 0
    if args.check:
        stale = [(lang, a) for lang in langs for a in release.stale(chosen, lang)]
        for lang, a in stale:
            print(f"{release.release_dir(lang).relative_to(nbs.ROOT)}/{a} is out of date: run `attn release"
                  + (f" --lang {lang}`" if lang != "en" else "`"))
        return 1 if stale else 0
    for lang in langs:
        changed = release.release(chosen, lang=lang)
        where = release.release_dir(lang).relative_to(nbs.ROOT)
        print(f"released {len(changed)} changed notebook(s) in {where}/: {', '.join(changed) or 'none'}")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """Grade one notebook with the hidden tests; print a report or the JSON contract."""
    if sys.platform == "win32":  # the engine runs the learner's code behind Unix sockets, in a worker process
        print("attn check: grading needs Linux or macOS; on Windows, run it in WSL (the notebooks and their visible "
              "tests work here as they are)", file=sys.stderr)
        return 2
    try:  # a notebook that is not there is said at once, before seconds of starting the grader
        nbs.find_notebook(args.notebook)
    except nbs.CourseError as exc:
        print(f"attn check: cannot grade: {exc}", file=sys.stderr)
        return 2
    from .engine.sandbox import Zygote

    try:  # the zygote imports torch & co. while this process does the same (a cold start: one import, not two)
        early = Zygote(nbs.ROOT, [nbs.grader_dir()])
    except FileNotFoundError:
        early = None  # check() says where the hidden tests should be
    from .engine.checking import Engine, check, render

    engine = Engine(zygote=early)
    try:
        result = check(args.notebook, assignment=args.assignment, lang=args.lang, only=args.exercise, engine=engine)
    except (nbs.CourseError, FileNotFoundError) as exc:
        print(f"attn check: cannot grade: {exc}", file=sys.stderr)
        return 2
    finally:
        engine.close()
    if args.json:
        from .i18n import speaking
        from .results import say

        with speaking(result.lang):
            for note in result.notes:
                print(f"attn check: note: {say(note)}", file=sys.stderr)
        print(json.dumps(result.to_json()))  # the JSON contract: the exercises' scores, feedback and mistakes
    else:
        print(render(result, verbose=args.verbose))
    from .progress import record_check

    record_check(result, args.notebook, args.exercise)  # for `attn progress`; on failure only a note on stderr
    return 0


def cmd_progress(args: argparse.Namespace) -> int:
    """Your own progress, read from your saved notebooks and the records of `attn check` on this machine."""
    from .progress import main as progress_main

    return progress_main(args.notebooks, lang=args.lang, as_json=args.json)


def cmd_references(args: argparse.Namespace) -> int:
    """Regenerate the stored reference tensors (or, with --check, report which are stale)."""
    from safetensors.torch import save_file

    from . import visible_make as visible
    from .grading import make_references, references_path, stale_references

    status = 0
    for assignment in args.assignments or nbs.assignments():
        if args.check:
            stale = stale_references(assignment)
            if stale:
                shown = ", ".join(stale[:5]) + (", ..." if len(stale) > 5 else "")
                print(f"{references_path(assignment).name} is stale ({shown}): run `attn references {assignment}`")
                status = 1
            if stale := visible.stale(assignment):
                print(f"{visible.path(assignment).name} is stale ({'; '.join(stale[:3])}): run `attn references "
                      f"{assignment}`")
                status = 1
        else:
            fresh = make_references(assignment)
            save_file(fresh, str(references_path(assignment)))
            print(f"wrote {len(fresh)} tensors to {references_path(assignment).relative_to(nbs.ROOT)}")
            named = visible.write(assignment)  # the plants' mistakes on the visible checks' inputs
            print(f"wrote the mistakes of {named} visible comparisons to {visible.path(assignment).relative_to(nbs.ROOT)}")
    return status


def cmd_execute(args: argparse.Namespace) -> int:
    """Re-run solution notebooks top to bottom and store their outputs with clean metadata."""
    for assignment in args.assignments or nbs.assignments():
        path = nbs.solution_path(assignment)
        nb = nbs.read(path)
        nbs.execute(nb, cwd=path.parent)
        nbs.write(nbs.clean(nb), path)
        print(f"executed {path.relative_to(nbs.ROOT)}")
    return 0


def cmd_autograde(args: argparse.Namespace) -> int:
    """Autograde a whole class with a pool of workers; the gradebook gets nbgrader's own scores."""
    from .engine.autograde import grade_class

    if not Path("nbgrader_config.py").is_file():
        os.chdir(nbs.ROOT)  # the course's own folder; nbgrader reads nbgrader_config.py from the folder it starts in
    try:
        summary = grade_class(args.assignment, jobs=args.jobs, students=args.student or None, force=args.force)
    except nbs.CourseError as exc:
        print(f"attn autograde: {exc}", file=sys.stderr)
        return 2
    print(f"{summary['assignment']}: {summary['submissions']} submissions in {summary['seconds']:g} s "
          f"({summary['per minute']:g} a minute, {summary['jobs']} jobs on {summary['cpus']} cores); "
          f"{summary['graded ahead']} graded by the pool, {summary['graded again']} again in nbgrader's pass")
    for student in summary["missing"]:
        print(f"  {student}: no submission of {summary['assignment']} in submitted/ (run `nbgrader collect` first?)")
    for student, why in summary["failed"].items():
        print(f"  {student}: nbgrader could not autograde it:\n{why}")
    return 1 if summary["failed"] or summary["missing"] else 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write nbgrader's gradebook as a file Canvas or Moodle imports, or as a plain CSV (utils/lms.py)."""
    from . import lms
    from .speech import _

    out = args.out or f"grades-{args.format}.csv"
    out = out if out == "-" else os.path.abspath(out)  # where the instructor ran the command, before the chdir below
    db = os.path.abspath(args.db) if args.db else None
    if not Path("nbgrader_config.py").is_file():
        os.chdir(nbs.ROOT)  # the course's own folder, as `attn autograde`: its nbgrader_config.py names the gradebook
    if db is None:
        from .engine.autograde import _api

        db_url = _api().coursedir.db_url
    else:
        db_url = db if "://" in db else f"sqlite:///{db}"
    try:
        result = lms.export(args.format, db_url=db_url, assignments=args.assignment, match=args.match)
    except lms.ExportError as exc:
        print(f"attn export: {exc}", file=sys.stderr)
        return 2
    data = lms.to_bytes(result.rows, args.format)
    try:
        if out == "-":
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        else:
            Path(out).write_bytes(data)
    except OSError as exc:
        print("attn export: " + _("cannot write {path}: {error}").format(path=out, error=exc.strerror or exc),
              file=sys.stderr)
        return 2
    tell = sys.stderr if out == "-" else sys.stdout
    for note in result.notes:
        print("attn export: " + _("note: {note}").format(note=note), file=tell)
    print(_("wrote {path}: {students} students, {assignments} assignments, {missing} without a submission (left "
            "ungraded)").format(path=out if out != "-" else _("standard output"), students=result.students,
                                assignments=result.assignments, missing=result.missing), file=tell)
    if step := lms.next_step(args.format, args.match):
        print(step, file=tell)
    return 0


def cmd_docs(args: argparse.Namespace) -> int:
    """Write README's course table, docs/COURSE.md's points, and the notebooks' Colab badges and Colab set-up
    from the registry (utils/course.py), and docs/maintainers.md's figures from docs/figures.json after taking in
    the figures measured since (build/figures/); then `attn release --lang all` for the student copies."""
    from . import docs, figures

    if not args.check:
        for key in figures.take_pending():
            print(f"docs/figures.json: {key} measured anew")
    stale = (docs.sync_docs(nbs.ROOT, write=not args.check) + docs.sync_picture(nbs.ROOT, write=not args.check)
             + docs.sync_notebooks(write=not args.check))
    for name in stale:
        print(f"{name}: {'out of date: run `attn docs`' if args.check else 'rewritten'}")
    return 1 if stale and args.check else 0


def cmd_i18n(args: argparse.Namespace) -> int:
    """Report what keeps a language's edition from being current (the notebooks' translations and the catalogue of
    messages); --todo prints YAML to translate; --update brings the catalogue in step with the sources."""
    from . import i18n

    if args.update:
        total, missing = i18n.update_catalogue(args.lang)
        paths = " and ".join(i18n.shown(i18n.catalogue_path(args.lang, domain=d)) for d in i18n.DOMAINS)
        print(f"{paths}: {total} messages, {missing} to translate")
        return 0
    problems: list[object] = []
    for notebook in args.assignments or nbs.assignments():
        if args.todo:
            print(i18n.todo(args.lang, notebook), end="")
            continue
        problems += i18n.status(args.lang, notebook)
    if args.todo:
        return 0
    if not args.assignments:
        problems += i18n.catalogue_problems(args.lang)
    for problem in problems:
        print(problem)
    print(f"{i18n.NAMES.get(args.lang, args.lang)}: {len(problems)} cell(s) or message(s) to translate or fix")
    return 1 if problems else 0


def cmd_bench(args: argparse.Namespace) -> int:
    """Measure the course's budgets and print them."""
    from .bench import autograde_figures, run

    if args.autograde:
        return 0 if autograde_figures(jobs=args.jobs) else 1
    return run(args.assignments or nbs.assignments())


def cmd_report(args: argparse.Namespace) -> int:
    """Write the class report (HTML and CSV) of one assignment, or of the whole course, from the gradebook."""
    from .i18n import speaking
    from .report import summary_lines, write

    course_dir = Path.cwd() if Path("nbgrader_config.py").is_file() else nbs.ROOT
    page, table, datas = write(course_dir, args.assignments or None, lang=args.lang, out=args.out,
                               lab_url=args.lab_url)
    with speaking(args.lang):
        for line in summary_lines(datas):
            print(line)
    print(f"wrote {page} and {table}")
    return 0


def cmd_site(args: argparse.Namespace) -> int:
    """Build the course website into _site/ (utils/site.py; `make site`)."""
    from .site import main as site_main

    return site_main(args.options)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="attn", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "lab", help="open the course in JupyterLab (what `make lab` runs); other options go to `jupyter lab`"
    )
    p.add_argument("--lang", choices=["en", "zh"], default="en",
                   help="zh: open the Chinese edition (notebooks/zh/), with JupyterLab's menus in Chinese")
    p.set_defaults(func=cmd_lab)

    p = sub.add_parser("release", help="regenerate notebooks/ (student copies) from solutions/ with nbgrader")
    p.add_argument("assignments", nargs="*", help="assignment ids (default: all)")
    p.add_argument("--check", action="store_true", help="only report notebooks that are out of date (exit 1)")
    p.add_argument("--lang", choices=["en", "zh", "all"], default="en",
                   help="which edition: en (notebooks/), zh (notebooks/zh/, 简体中文) or all (default: en)")
    p.add_argument("--solutions", action="store_true",
                   help="instead, write the edition's solutions to solutions-LANG/: nbgrader's source folder for a "
                        "class in that language")
    p.set_defaults(func=cmd_release)

    p = sub.add_parser("check", help="grade one notebook with the hidden tests")
    p.add_argument("notebook", help="a .ipynb file, its folder, or an id such as 01_attention_intuition")
    p.add_argument("--json", action="store_true", help="print one JSON object (see README) instead of a report")
    p.add_argument("--verbose", "-v", action="store_true",
                   help="list every check of every exercise, not only the likely mistake and the checks that show it")
    p.add_argument("--as", dest="assignment", metavar="ID",
                   help="grade the file as this assignment (default: from its name, else from its exercise cells)")
    p.add_argument("--lang", choices=["en", "zh"],
                   help="the feedback's language (default: the notebook's: a Chinese copy gets Chinese feedback)")
    p.add_argument("--exercise", "-e", metavar="NAME",
                   help="grade this exercise only (faster): the cells up to its test cell run, no other test")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("progress", help="your progress: for each notebook of your copy, the exercises done, their last "
                                        "scores and the mistakes named, from your saved notebooks and the records "
                                        "`attn check` keeps on this machine (nothing is sent anywhere)")
    p.add_argument("notebooks", nargs="*", metavar="NOTEBOOK",
                   help="an id such as 01_attention_intuition, its number (01), or a notebook file (default: all eight)")
    p.add_argument("--lang", choices=["en", "zh"],
                   help="which edition and language (default: the one you have been working in, else en)")
    p.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    p.set_defaults(func=cmd_progress)

    p = sub.add_parser("autograde", help="autograde every submission of an assignment (nbgrader's gradebook), in parallel")
    p.add_argument("assignment", help="an assignment id such as 02_scaled_dot_product_attention")
    p.add_argument("--jobs", "-j", type=int, default=max(1, min(4, os.cpu_count() or 1)),
                   help="processes grading at once (default: the cores, at most 4)")
    p.add_argument("--student", action="append", metavar="ID", help="only this student (repeat for more)")
    p.add_argument("--force", action="store_true", help="grade again submissions nbgrader has already autograded")
    p.set_defaults(func=cmd_autograde)

    p = sub.add_parser("export", help="write nbgrader's gradebook as a file Canvas or Moodle imports, or a plain CSV")
    p.add_argument("--format", required=True, choices=["canvas", "moodle", "csv"],
                   help="canvas: Grades → Import; moodle: Grades → Import → CSV file; csv: one row per student with "
                        "id, names, email, one column per assignment and the total")
    p.add_argument("--assignment", action="append", metavar="ID",
                   help="only this assignment (repeat for more; default: every assignment of the gradebook)")
    p.add_argument("--out", metavar="FILE",
                   help="the file to write (default: grades-FORMAT.csv in the current folder; - for standard output)")
    p.add_argument("--match", choices=["id", "email"],
                   help="what the LMS matches students on: the nbgrader student id (Canvas's SIS Login ID, Moodle's "
                        "username) or their email (default: id for canvas, email for moodle)")
    p.add_argument("--db", metavar="FILE",
                   help="the gradebook to read (default: the one nbgrader_config.py names, in the course folder)")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("references", help="regenerate the hidden tests' reference tensors in grader/")
    p.add_argument("assignments", nargs="*", help="assignment ids (default: all)")
    p.add_argument("--check", action="store_true", help="only report stale reference files (exit 1)")
    p.set_defaults(func=cmd_references)

    p = sub.add_parser("execute", help="re-run solution notebooks and store their outputs (maintainers)")
    p.add_argument("assignments", nargs="*", help="assignment ids (default: all)")
    p.set_defaults(func=cmd_execute)

    p = sub.add_parser("docs", help="write README's course table, docs/COURSE.md's points and docs/maintainers.md's "
                                    "figures from utils/course.py and docs/figures.json")
    p.add_argument("--check", action="store_true", help="only report tables that are out of date (exit 1)")
    p.set_defaults(func=cmd_docs)

    p = sub.add_parser("i18n", help="what keeps a translated edition from being current (i18n/LANG/*.yml)")
    p.add_argument("assignments", nargs="*", help="assignment ids (default: all)")
    p.add_argument("--lang", default="zh", help="the edition's language (default: zh)")
    p.add_argument("--todo", action="store_true", help="print YAML entries to translate, with the English")
    p.add_argument("--update", action="store_true",
                   help="bring utils/locale/LANG/LC_MESSAGES/attn.po in step with the sources, and compile it")
    p.set_defaults(func=cmd_i18n)

    p = sub.add_parser("bench", help="measure the performance budgets and print the figures")
    p.add_argument("assignments", nargs="*", help="assignment ids (default: all)")
    p.add_argument("--autograde", action="store_true",
                   help="instead, time `attn autograde` on classes of 40 submissions of 02 and 20 of 08")
    p.add_argument("--jobs", "-j", type=int, default=2, help="with --autograde: processes grading at once")
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("report", help="after autograde: a class report of scores, named mistakes and who may need "
                                      "help (HTML and CSV), from the gradebook")
    p.add_argument("assignments", nargs="*", help="assignment ids (default: the whole course, every assignment the "
                                                  "gradebook has)")
    p.add_argument("--lang", choices=["en", "zh"], default="en", help="the report's language (default: en)")
    p.add_argument("--out", type=Path, metavar="DIR", help="where to write it (default: reports/ in the course folder)")
    p.add_argument("--lab-url", default="http://localhost:8888/", metavar="URL",
                   help="the JupyterLab its section links open (default: http://localhost:8888/, `attn lab`'s)")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("site", help="build the course website (English and Chinese) into _site/ (what `make site` runs)")
    p.add_argument("options", nargs=argparse.REMAINDER, help="utils/site.py's: --out DIR, --lang en|zh|all")
    p.set_defaults(func=cmd_site)

    from .translator.cli import add_parsers

    add_parsers(sub)  # attn train, attn translate (notebook 08's translator)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "lab":
        args.jupyter_args = extra  # e.g. --no-browser --port=8889
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return args.func(args)
    except nbs.CourseError as exc:
        print(f"attn {args.command}: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
