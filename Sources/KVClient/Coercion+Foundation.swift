import Foundation
import KVValues

extension Coercion {
    /// An `NSNumber` as the stored value of its type: a boolean as a bool, a `float` widened
    /// to a real (as Foundation stores it), a `double` as a real, an unsigned number as an integer if it fits in 64
    /// signed bits (else nil), any other as an integer. `.none` (not nil) when `any` is not an
    /// `NSNumber` (Swift numbers are converted by type, not through this).
    static func foundationNumber(_ any: Any) -> Value?? {
        guard type(of: any) is NSNumber.Type, let number = any as? NSNumber else { return .none }
        switch String(cString: number.objCType) {
        case "c", "B": return .some(.bool(number.boolValue))
        case "f": return .some(.real(Double(number.floatValue)))
        case "d": return .some(.real(number.doubleValue))
        case "C", "S", "I", "L", "Q": return .some(Int64(exactly: number.uint64Value).map(Value.integer))
        default: return .some(.integer(number.int64Value))
        }
    }
}
