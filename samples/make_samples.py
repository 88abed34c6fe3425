"""Generate the binary files of the sample corpus: photosynthesis.pdf and tea_handbook.docx.

The binary samples are committed, but they are built by this script so their text can be reviewed and
changed like any other source. The PDF is written in reportlab's invariant mode so that regenerating it
gives identical bytes. Run from the repository root:

    .venv/bin/python samples/make_samples.py
"""

from __future__ import annotations

import argparse
import datetime as dt
import logging
from pathlib import Path

import docx
from reportlab.lib.pagesizes import A4
from reportlab.lib.styles import getSampleStyleSheet
from reportlab.platypus import PageBreak, Paragraph, SimpleDocTemplate, Spacer

logger = logging.getLogger(__name__)

DEFAULT_OUTPUT_DIR = Path(__file__).resolve().parent / "corpus"
PDF_NAME = "photosynthesis.pdf"
DOCX_NAME = "tea_handbook.docx"
#: Fixed document dates keep the DOCX metadata stable between runs.
DOCX_DATE = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
PARAGRAPH_GAP_POINTS = 8

#: One list of (heading, paragraphs) per PDF page, so each page has its own citable topic.
PHOTOSYNTHESIS_PAGES: list[list[tuple[str, list[str]]]] = [
    [
        (
            "Photosynthesis",
            [
                "Photosynthesis is the process by which plants, algae and cyanobacteria convert light energy "
                "into chemical energy stored in sugars. It supplies almost all of the organic matter and "
                "most of the oxygen in Earth's atmosphere.",
                "The overall reaction combines six molecules of carbon dioxide and six molecules of water, "
                "using light energy, to make one molecule of glucose and six molecules of oxygen: "
                "6 CO2 + 6 H2O -> C6H12O6 + 6 O2.",
                "In plants, photosynthesis takes place in chloroplasts, mostly in the cells of leaves. "
                "Chloroplasts contain the green pigment chlorophyll, which absorbs red and blue light and "
                "reflects green light; this is why leaves look green.",
            ],
        ),
        (
            "Discovery",
            [
                "In 1779 the Dutch physician Jan Ingenhousz showed that plants release oxygen only when "
                "their green parts are exposed to light. In the 1950s Melvin Calvin traced the path of "
                "carbon through the process, work that earned him the Nobel Prize in Chemistry in 1961.",
            ],
        ),
    ],
    [
        (
            "The Light-Dependent Reactions",
            [
                "The first stage of photosynthesis happens in the thylakoid membranes inside the "
                "chloroplast. Chlorophyll in photosystem II and photosystem I absorbs light and passes "
                "energised electrons along an electron transport chain.",
                "To replace those electrons, water molecules are split, a step called photolysis. Splitting "
                "water releases oxygen gas as a by-product, which is the source of the oxygen we breathe.",
                "The energy captured in this stage is stored in two carrier molecules, ATP and NADPH, which "
                "power the second stage.",
            ],
        ),
    ],
    [
        (
            "The Calvin Cycle",
            [
                "The second stage, also called the light-independent reactions, takes place in the stroma "
                "of the chloroplast. Using ATP and NADPH, the Calvin cycle fixes carbon dioxide from the air "
                "into three-carbon sugars that the plant uses to build glucose, sucrose and starch.",
                "The enzyme RuBisCO catalyses the first step of carbon fixation. It is thought to be the "
                "most abundant protein on Earth.",
            ],
        ),
        (
            "C4 and CAM Plants",
            [
                "Some plants have evolved ways to concentrate carbon dioxide and reduce water loss. C4 "
                "plants such as maize and sugarcane fix carbon in two different cell types, while CAM "
                "plants such as cacti and pineapple open their stomata only at night.",
                "Photosynthesis by cyanobacteria began adding oxygen to the atmosphere about 2.4 billion "
                "years ago, an event known as the Great Oxidation Event.",
            ],
        ),
    ],
]

TEA_TITLE = "The Tea Handbook"
TEA_INTRO = (
    "Tea is a drink made by pouring hot water over the cured leaves of Camellia sinensis, an evergreen "
    "shrub native to East Asia. After water, it is the most widely consumed drink in the world."
)
#: (heading level, heading, paragraphs) in document order.
TEA_SECTIONS: list[tuple[int, str, list[str]]] = [
    (
        1,
        "History of Tea",
        [
            "According to Chinese legend, the emperor Shennong discovered tea in 2737 BC when leaves blew "
            "into his pot of boiling water. Tea drinking became widespread in China during the Tang "
            "dynasty, when Lu Yu wrote The Classic of Tea in the 8th century.",
            "Dutch traders brought tea to Europe at the beginning of the 17th century, and it became the "
            "national drink of Britain in the 18th century.",
        ],
    ),
    (
        1,
        "Types of Tea",
        ["All true teas come from the same plant; they differ in how the leaves are processed."],
    ),
    (
        2,
        "Green Tea",
        [
            "Green tea is heated soon after picking to stop oxidation, which keeps its fresh, grassy taste. "
            "Matcha is a Japanese green tea ground into a fine powder and whisked with water."
        ],
    ),
    (
        2,
        "White Tea",
        [
            "White tea is made from young buds and leaves that are simply withered and dried, which makes "
            "it the least processed type of tea."
        ],
    ),
    (
        2,
        "Oolong Tea",
        ["Oolong tea is partially oxidised, placing it between green and black tea in flavour."],
    ),
    (
        2,
        "Black Tea",
        [
            "Black tea is fully oxidised, giving it a darker colour and a stronger flavour. In China it is "
            "called red tea because of the colour of the brewed liquor. Assam and Darjeeling in India are "
            "famous black tea regions."
        ],
    ),
    (
        2,
        "Pu-erh Tea",
        [
            "Pu-erh is a fermented and often aged tea from Yunnan province in China, sold loose or "
            "pressed into cakes."
        ],
    ),
    (
        1,
        "Brewing Tea",
        [
            "Delicate teas need cooler water: boiling water scorches green tea and makes it bitter. The "
            "table below gives typical water temperatures and steeping times.",
        ],
    ),
]
TEA_TABLE_HEADER = ("Tea", "Water temperature", "Steeping time")
TEA_TABLE_ROWS = [
    ("Green", "70-80 °C", "2-3 minutes"),
    ("White", "75-85 °C", "3-4 minutes"),
    ("Oolong", "85-95 °C", "3-5 minutes"),
    ("Black", "95-100 °C", "3-5 minutes"),
]
TEA_CLOSING = (
    1,
    "Caffeine",
    [
        "A cup of black tea contains roughly 40 to 50 milligrams of caffeine, about half as much as a cup of "
        "brewed coffee. Tea also contains L-theanine, an amino acid associated with calm alertness."
    ],
)


def write_photosynthesis_pdf(path: Path) -> None:
    """A three-page PDF with a real text layer, one topic per page."""
    styles = getSampleStyleSheet()
    document = SimpleDocTemplate(
        str(path), pagesize=A4, title="Photosynthesis", author="Sample corpus", invariant=1
    )
    story: list[object] = []
    for page_number, page in enumerate(PHOTOSYNTHESIS_PAGES):
        if page_number:
            story.append(PageBreak())
        for heading, paragraphs in page:
            story.append(Paragraph(heading, styles["Heading1"]))
            for text in paragraphs:
                story.append(Paragraph(text, styles["BodyText"]))
                story.append(Spacer(1, PARAGRAPH_GAP_POINTS))
    document.build(story)


def write_tea_docx(path: Path) -> None:
    """A DOCX with a Title, Heading 1/2 sections and a table, the structures the DOCX loader reads."""
    document = docx.Document()
    properties = document.core_properties
    properties.title = TEA_TITLE
    properties.author = "Sample corpus"
    properties.created = DOCX_DATE
    properties.modified = DOCX_DATE
    document.add_heading(TEA_TITLE, level=0)
    document.add_paragraph(TEA_INTRO)
    for level, heading, paragraphs in TEA_SECTIONS:
        document.add_heading(heading, level=level)
        for text in paragraphs:
            document.add_paragraph(text)
    table = document.add_table(rows=1, cols=len(TEA_TABLE_HEADER))
    for cell, text in zip(table.rows[0].cells, TEA_TABLE_HEADER, strict=True):
        cell.text = text
    for row in TEA_TABLE_ROWS:
        for cell, text in zip(table.add_row().cells, row, strict=True):
            cell.text = text
    level, heading, paragraphs = TEA_CLOSING
    document.add_heading(heading, level=level)
    for text in paragraphs:
        document.add_paragraph(text)
    document.save(str(path))


def main() -> None:
    """Write both files into the output folder (the sample corpus by default)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output-dir", type=Path, default=DEFAULT_OUTPUT_DIR)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args.output_dir.mkdir(parents=True, exist_ok=True)
    write_photosynthesis_pdf(args.output_dir / PDF_NAME)
    write_tea_docx(args.output_dir / DOCX_NAME)
    logger.info("wrote %s and %s in %s", PDF_NAME, DOCX_NAME, args.output_dir)


if __name__ == "__main__":
    main()
