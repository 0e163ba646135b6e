/// The operator's console page (placeholder until the page lands).
enum ConsolePage {
    static let html = #"""
<!DOCTYPE html><html><head><meta charset="utf-8"><title>coord console</title></head><body><div id="tiles"></div></body></html>
"""#
}
